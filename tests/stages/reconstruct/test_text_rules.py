"""The text path never invents, by the recipe's declarations; the server's ids decide wherever it sent them."""

from __future__ import annotations

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.rebuild.build import Reconstructor
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.recipes import bundled_families
from eagle3_core.target.config import ChatSettings, TargetConfig
from eagle3_core.target.tokenizer import token_facts
from tests.families.real_vocabularies import TEXTS_ONLY
from tests.stages.reconstruct.conftest import ALL_FAMILIES
from tests.stages.reconstruct.records import record

USER = [{"role": "user", "content": "What is 2 + 2?"}]


def run(family: str, tokenizers, records: list[dict], chat: dict | None = None, **target_changes):
    tok = tokenizers[family]
    target = TargetConfig(**ALL_FAMILIES[family].target | target_changes)
    facts = token_facts(tok, target, "/none")
    chat_settings = ChatSettings(chat_template_kwargs=chat or {})
    return Reconstructor(tok, facts, ReconstructConfig(), chat_settings, target).run(records)


def reasons(result) -> list[str]:
    return [r["reason"] for r in result.rejects]


def test_a_whitespace_stripping_parser_without_ids_is_a_counted_reject_and_with_ids_trains_on_them(family_tokenizers):
    tok = family_tokenizers["glm45"]
    completion = tok.encode("\n<think>Four.</think>\n4.<|user|>", add_special_tokens=False)
    prompt = tok.apply_chat_template(USER, tokenize=False, add_generation_prompt=True)
    result = run(
        "glm45",
        family_tokenizers,
        [
            record("text", USER, "Four.", "\n4."),
            record("ids", USER, "Four.", "\n4.", prompt_token_ids=tok.encode(prompt), completion_token_ids=completion),
        ],
    )
    assert reasons(result) == ["stripped_reasoning_without_ids"]
    assert result.rows["source"] == ["server"] and result.rows["input_ids"][0][-len(completion) :] == completion


def test_an_unknown_thinking_state_without_ids_is_a_counted_reject(family_tokenizers):
    hybrid = {"thinking": {"kwarg": "enable_thinking", "default": None}, "parser_strips_whitespace": False}
    result = run("glm45", family_tokenizers, [record("a", USER, "Four.", "\n4.")], **hybrid)
    assert reasons(result) == ["thinking_state_unknown"]
    settled = run("glm45", family_tokenizers, [record("a", USER, "Four.", "\n4.")], {"enable_thinking": True}, **hybrid)
    assert settled.rejects == [] and settled.rows["source"] == ["text"]


def test_a_think_open_the_text_does_not_show_is_a_counted_reject(family_tokenizers):
    result = run(
        "deepseek_r1_0528", family_tokenizers, [record("a", USER, "Four.", "4.")], think_open_always_written=False
    )
    assert reasons(result) == ["think_open_not_shown"]
    forced = run("deepseek_r1", family_tokenizers, [record("a", USER, "Four.", "4.")], think_open_always_written=False)
    assert forced.rejects == []  # the prompt forces <think>: nothing left to guess


def test_a_prompt_closed_by_a_bare_think_close_is_thinking_off(family_tokenizers):
    off = run("deepseek_v3_1", family_tokenizers, [record("off", USER, "", "4."), record("r", USER, "Four.", "4.")])
    assert reasons(off) == ["reasoning_after_closed_think"]  # the R1 recipe's confusion: an answer filed as reasoning
    tok = family_tokenizers["deepseek_v3_1"]
    assert tok.decode([t for t, m in zip(off.rows["input_ids"][0], off.rows["loss_mask"][0]) if m]) == (
        "4.<｜end▁of▁sentence｜>"
    )


def test_without_a_template_a_record_with_ids_trains_on_them_and_one_without_is_rejected(family_tokenizers):
    tok = family_tokenizers["deepseek_v3_2"]
    prompt = tok.encode(
        "<｜begin▁of▁sentence｜><｜User｜>What is 2 + 2?<｜Assistant｜></think>", add_special_tokens=False
    )
    completion = tok.encode("4.<｜end▁of▁sentence｜>", add_special_tokens=False)
    with_ids = record("ids", USER, "", "4.", prompt_token_ids=prompt, completion_token_ids=completion)
    result = run("deepseek_v3_2", family_tokenizers, [with_ids, record("text", USER, "", "4.")])
    assert reasons(result) == ["template_error"]
    assert result.rows["input_ids"] == [prompt + completion] and result.counts["unchecked_template_error"] == 1


@pytest.mark.parametrize(
    "changes,field,value",
    [
        (
            {"harmony": {"channel": {"text": "<|channel|>", "id": 200004}}},
            "target.harmony.channel.id is 200004",
            "200005",
        ),
        ({"other_turn_ends": [{"text": "<|call|>", "id": 1}]}, "target.other_turn_ends[0].id is 1", "200012"),
        ({"other_turn_ends": [{"text": "<|callx|>"}]}, "target.other_turn_ends[0].text '<|callx|>'", "encodes as"),
    ],
)
def test_a_recipe_that_contradicts_the_tokenizer_is_one_config_error_naming_the_field(
    changes, field, value, family_tokenizers
):
    target = TargetConfig(**ALL_FAMILIES["gpt_oss"].target | changes)
    with pytest.raises(ConfigError) as err:
        token_facts(family_tokenizers["gpt_oss"], target, "/none")
    assert field in str(err.value) and value in str(err.value)


def test_every_bundled_recipe_agrees_with_its_family_tokenizer_and_declares_its_template(family_tokenizers):
    from eagle3_core.config import PipelineConfig

    families = bundled_families()
    assert {"gpt_oss", "glm45", "minimax_m2", "deepseek_v3_1", "deepseek_v3_2"} <= set(families)
    assert {"deepseek_r1_distill_qwen", "deepseek_r1_distill_llama"} <= set(families)
    for family, path in families.items():
        target = PipelineConfig.from_yaml(path).target
        facts = token_facts(family_tokenizers[family], target, "/none")
        expected = facts.turn_end_ids[0] if family in TEXTS_ONLY else target.end_of_turn_id  # texts only: no id
        assert facts.turn_end_ids[0] == expected and target.template_version, family


def test_a_family_vllm_encodes_in_python_trains_on_the_servers_prompt_and_checks_its_completion(family_tokenizers):
    """DeepSeek-V4's recipe (tokenizer_mode deepseek_v4: no Jinja template): the prompt is the server's
    ids, the completion is rebuilt from the text as their check, and a record without prompt ids is
    rejected for what it lacks (no_server_prompt_ids), never sent through a template that is not there."""
    from eagle3_core.config import PipelineConfig

    tok = family_tokenizers["deepseek_v4"]
    target = PipelineConfig.from_yaml(bundled_families()["deepseek_v4"]).target
    prompt = tok.encode(
        "<｜begin▁of▁sentence｜><｜User｜>What is 2 + 2?<｜Assistant｜><think>", add_special_tokens=False
    )
    completion = tok.encode("Two and two.</think>4.<｜end▁of▁sentence｜>", add_special_tokens=False)
    with_ids = record("ids", USER, "Two and two.", "4.", prompt_token_ids=prompt, completion_token_ids=completion)
    without = record("text", USER, "Two and two.", "4.")
    facts = token_facts(tok, target, "/none")
    result = Reconstructor(tok, facts, ReconstructConfig(), target.chat, target).run([with_ids, without])

    assert reasons(result) == ["no_server_prompt_ids"] and "--tokenizer-mode deepseek_v4" in result.rejects[0]["detail"]
    assert result.rows["input_ids"] == [prompt + completion]
    assert result.counts["server_checked"] == result.counts["server_matched"] == 1  # the completion's text check
