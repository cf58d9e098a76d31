"""Reconstruction never invents or drops a token: the text decides only what it shows; ids decide the rest."""

from __future__ import annotations

import json

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.rebuild.build import Reconstructor
from eagle3_core.run.manifest import StageManifest, write_manifest
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import ChatSettings, TargetConfig
from eagle3_core.target.tokenizer import token_facts
from tests.stages.reconstruct.families import FAMILIES
from tests.stages.reconstruct.records import record, write_generations

USER = [{"role": "user", "content": "What is 2 + 2?"}]
ADD = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
CALL = [{"id": "c0", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}]


def reconstructor(family: str, tokenizers, cfg: ReconstructConfig | None = None) -> Reconstructor:
    tok = tokenizers[family]
    return Reconstructor(
        tok, token_facts(tok, TargetConfig(**FAMILIES[family].target), "/none"), cfg or ReconstructConfig()
    )


def ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("family", ["kimi_k2_5", "qwen3", "deepseek_r1"])
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_an_empty_answer_without_ids_is_rejected_as_undecidable(family, finish, family_tokenizers):
    # stop: ended inside the reasoning, or right after </think>? length: cut before or after </think>?
    result = reconstructor(family, family_tokenizers).run([record("a", USER, "Thinking", "", finish_reason=finish)])
    assert result.rows["sample_id"] == [] and [r["reason"] for r in result.rejects] == ["think_undecidable"]
    assert result.counts["rejected"] == 1


def test_no_reasoning_where_the_model_opens_think_itself_is_undecidable_without_ids(family_tokenizers):
    # Qwen3: `<think></think>` before the answer, or no think block at all? The text cannot say.
    result = reconstructor("qwen3", family_tokenizers).run([record("a", USER, "", " 4.")])
    assert [r["reason"] for r in result.rejects] == ["think_undecidable"]


def test_end_of_turn_inside_the_reasoning_with_ids_gets_no_invented_think_close(family_tokenizers):
    tok = family_tokenizers["kimi_k2_5"]
    out = ids(tok, "Thinking<|im_end|>")
    result = reconstructor("kimi_k2_5", family_tokenizers, ReconstructConfig(prefer="text")).run(
        [record("a", USER, "Thinking", "", completion_token_ids=out)]
    )
    seq = result.rows["input_ids"][0]
    assert seq[-len(out) :] == out and 163607 not in seq  # no </think> the model never wrote
    assert result.counts["server_matched"] == 1


def test_a_length_cut_right_after_think_close_keeps_it(family_tokenizers):
    tok = family_tokenizers["kimi_k2_5"]
    out = ids(tok, "Thinking</think>")
    result = reconstructor("kimi_k2_5", family_tokenizers, ReconstructConfig(prefer="text")).run(
        [record("a", USER, "Thinking", "", finish_reason="length", completion_token_ids=out)]
    )
    assert result.rows["input_ids"][0][-len(out) :] == out and result.counts["server_matched"] == 1


def test_a_tool_call_without_ids_is_rejected_and_with_ids_trains_on_them(family_tokenizers):
    tok = family_tokenizers["qwen3"]
    out = ids(tok, '<think>\nAdd.\n</think>\n\n<tool_call>\n{"name": "add"}\n</tool_call><|im_end|>')
    calls, tools = json.dumps(CALL), json.dumps(ADD)
    result = reconstructor("qwen3", family_tokenizers).run(
        [
            record("no-ids", USER, "\nAdd.\n", "", finish_reason="tool_calls", tools=tools, tool_calls=calls),
            record(
                "ids",
                USER,
                "\nAdd.\n",
                "",
                finish_reason="tool_calls",
                tools=tools,
                tool_calls=calls,
                completion_token_ids=out,
            ),
        ]
    )
    assert [r["reason"] for r in result.rejects] == ["tool_calls_without_ids"]
    seq, mask = result.rows["input_ids"][0], result.rows["loss_mask"][0]
    assert result.rows["source"] == ["server"] and seq[-len(out) :] == out
    assert all(mask[-len(out) :]) and not any(mask[: -len(out)])  # the call is supervised, the prompt is not
    assert '"name": "add"' in tok.decode(seq[: -len(out)])  # the template was rendered with the tools


def test_reconstruct_renders_with_the_recorded_chat_settings(family_dirs, tmp_path):
    gen = write_generations(tmp_path / "gen", [record("a", USER, "", " 4.")])
    recorded = ChatSettings(chat_template_kwargs={"enable_thinking": False})
    write_manifest(
        gen,
        StageManifest(
            stage="generate",
            status="complete",
            config_hash="x",
            inputs={},
            details={"chat": recorded.model_dump(mode="json")},
        ),
    )
    target = TargetConfig(path=str(family_dirs["qwen3"]), **FAMILIES["qwen3"].target, chat=recorded)
    run_reconstruct(ReconstructConfig(), target, gen, tmp_path / "seq")
    other = target.model_copy(update={"chat": ChatSettings(chat_template_kwargs={"enable_thinking": True})})
    with pytest.raises(ConfigError) as info:
        run_reconstruct(ReconstructConfig(), other, gen, tmp_path / "seq2")
    assert (
        "made with target.chat.chat_template_kwargs = {'enable_thinking': False}, but this recipe says "
        "target.chat.chat_template_kwargs = {'enable_thinking': True}"
    ) in str(info.value)
