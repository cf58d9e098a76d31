"""A harmony family (gpt-oss) trains on the server's ids only: the server renders its prompt itself.

vLLM 0.32 renders every gpt_oss prompt with openai-harmony, never the Hugging Face template
(``renderers/online_renderer.py`` ``_make_request_with_harmony``: its own date, the valid
channels, ``<|constrain|>json``, tool results as harmony writes them), and flattens the answer's
messages into the texts (``parser/harmony.py`` ``HarmonyParser.parse``: the analysis messages
joined by "\\n" into ``reasoning``, the final ones into ``content``). So a record without the
server's prompt ids is rejected (``no_server_prompt_ids``), one without its completion ids too
(``harmony_messages_without_ids``), and a record with both is exactly those ids.
"""

from __future__ import annotations

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.rebuild.build import Reconstructor
from eagle3_core.run.manifest import StageManifest, write_manifest
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.tokenizer import token_facts
from tests.stages.reconstruct.conftest import ALL_FAMILIES
from tests.stages.reconstruct.records import record, write_generations

USER = [{"role": "user", "content": "What is 2 + 2?"}]
# The prompt as vLLM's harmony renderer writes it: another date and effort than the local template's
# default render (2025-06-28, medium), so a row that took the local render would differ from it.
SERVER_PROMPT = (
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\nCurrent date: 2026-12-04\n\nReasoning: high\n\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
    "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant"
)
ONE_MESSAGE = (
    "<|channel|>analysis<|message|>Two and two.<|end|><|start|>assistant<|channel|>final<|message|>4.<|return|>"
)
# Two analysis messages: vLLM's reasoning is "First.\nSecond.", which open + reasoning + close cannot give back.
TWO_MESSAGES = (
    "<|channel|>analysis<|message|>First.<|end|><|start|>assistant<|channel|>analysis<|message|>Second.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>4.<|return|>"
)


def gpt_oss() -> TargetConfig:
    return TargetConfig(**ALL_FAMILIES["gpt_oss"].target)


def reconstructor(tokenizer, prefer: str = "server") -> Reconstructor:
    target = gpt_oss()
    facts = token_facts(tokenizer, target, "/none")
    return Reconstructor(tokenizer, facts, ReconstructConfig(prefer=prefer), target.chat, target)


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("prefer", ["server", "text"])
@pytest.mark.parametrize("completion", [False, True], ids=["no_ids", "completion_ids_only"])
def test_a_harmony_record_without_the_servers_prompt_ids_is_rejected_never_rendered_here(
    prefer, completion, family_tokenizers
):
    tok = family_tokenizers["gpt_oss"]
    rec = record("a", USER, "Two and two.", "4.", completion_token_ids=ids(tok, ONE_MESSAGE) if completion else None)
    result = reconstructor(tok, prefer).run([rec])
    assert result.rows["sample_id"] == []
    assert [r["reason"] for r in result.rejects] == ["no_server_prompt_ids"]
    assert "openai-harmony" in result.rejects[0]["detail"] and result.counts["rejected"] == 1


def test_a_harmony_record_without_completion_ids_is_rejected_even_when_its_text_looks_like_one_message(
    family_tokenizers,
):
    tok = family_tokenizers["gpt_oss"]
    rec = record("a", USER, "Two and two.", "4.", prompt_token_ids=ids(tok, SERVER_PROMPT))
    result = reconstructor(tok).run([rec])
    assert [r["reason"] for r in result.rejects] == ["harmony_messages_without_ids"]


@pytest.mark.parametrize("prefer", ["server", "text"])
def test_a_harmony_record_with_ids_trains_on_exactly_those_ids(prefer, family_tokenizers):
    tok = family_tokenizers["gpt_oss"]
    prompt, out = ids(tok, SERVER_PROMPT), ids(tok, ONE_MESSAGE)
    rec = record("a", USER, "Two and two.", "4.", prompt_token_ids=prompt, completion_token_ids=out)
    result = reconstructor(tok, prefer).run([rec])
    assert result.rejects == [] and result.rows["input_ids"] == [prompt + out]
    assert result.rows["loss_mask"] == [[0] * len(prompt) + [1] * len(out)]
    # the check compares the completion only: the prompt is the server's, whatever the local template says
    assert result.counts["server_checked"] == result.counts["server_matched"] == 1 and result.mismatches == []


def test_several_harmony_messages_are_the_ids_and_the_flattened_text_is_only_a_failed_check(family_tokenizers):
    tok = family_tokenizers["gpt_oss"]
    prompt, out = ids(tok, SERVER_PROMPT), ids(tok, TWO_MESSAGES)
    rec = record("a", USER, "First.\nSecond.", "4.", prompt_token_ids=prompt, completion_token_ids=out)
    result = reconstructor(tok).run([rec])
    assert result.rows["input_ids"] == [prompt + out] and result.rows["source"] == ["server"]
    assert result.rows["loss_mask"] == [[0] * len(prompt) + [1] * len(out)]
    (mismatch,) = result.mismatches
    assert mismatch["where"] == "completion" and mismatch["first_diff"] > len(prompt)


def test_the_stage_counts_each_harmony_reject_under_its_reason(tmp_path, family_dirs, family_tokenizers):
    tok = family_tokenizers["gpt_oss"]
    prompt, out = ids(tok, SERVER_PROMPT), ids(tok, ONE_MESSAGE)
    records = [
        record("text", USER, "Two and two.", "4."),  # source: dataset, or a server that sent no ids
        record("prompt-only", USER, "Two and two.", "4.", prompt_token_ids=prompt),  # vLLM issue 28246
        record("both", USER, "Two and two.", "4.", prompt_token_ids=prompt, completion_token_ids=out),
    ]
    gen = write_generations(tmp_path / "gen", records)
    target = gpt_oss().model_copy(update={"path": str(family_dirs["gpt_oss"])})
    manifest = run_reconstruct(ReconstructConfig(), target, gen, tmp_path / "seq")
    assert manifest.details["reject_reasons"] == {"harmony_messages_without_ids": 1, "no_server_prompt_ids": 1}
    assert manifest.counts["sequences"] == manifest.counts["source_server"] == 1


def test_generations_recorded_with_the_effort_as_a_template_variable_are_refused(tmp_path, family_dirs):
    gen = write_generations(tmp_path / "gen", [record("a", USER, "r", "c")])
    chat = {"chat_template_kwargs": {"reasoning_effort": "high"}, "skip_special_tokens": True}
    details = {"chat": chat | {"spaces_between_special_tokens": True}}
    write_manifest(gen, StageManifest(stage="generate", status="complete", config_hash="x", inputs={}, details=details))
    target = gpt_oss().model_copy(update={"path": str(family_dirs["gpt_oss"])})
    with pytest.raises(ConfigError, match="set target.chat.reasoning_effort instead"):
        run_reconstruct(ReconstructConfig(), target, gen, tmp_path / "seq")
