"""Golden files: the exact ids and loss mask of a single-turn, a multi-turn (with a system prompt)
and a tool-call sample per family.

Each file in tests/golden/reconstruct-<family>-<case>.json holds the generation record, the
full text, ids and mask; the family tokenizers carry the REAL special ids (sources in
tests/stages/reconstruct/families.py and in each file's ``source``). Regenerate after a deliberate
layout change with ``EAGLE3_REGEN_GOLDEN=1 pytest tests/stages/reconstruct/test_golden.py`` and read
the diff: every id must be where the family's documented layout puts it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from eagle3_core.rebuild.build import Reconstructor
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.target.config import ChatSettings, TargetConfig
from eagle3_core.target.tokenizer import token_facts
from tests.stages.reconstruct.families import FAMILIES
from tests.stages.reconstruct.records import record

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
SOURCES = {
    "kimi_k2_5": "issue 4 (ids 163606/163607/163586); moonshotai/Kimi-K2.5 tokenizer_config.json and chat_template.jinja",
    "qwen3": "Qwen/Qwen3-8B tokenizer_config.json (added_tokens_decoder, chat_template)",
    "deepseek_r1": "deepseek-ai/DeepSeek-R1 tokenizer_config.json (added_tokens_decoder, chat_template of 2025-02)",
    "deepseek_r1_0528": "deepseek-ai/DeepSeek-R1-0528 tokenizer_config.json (chat_template without a forced <think>)",
    "llama3": "meta-llama/Llama-3.1-8B-Instruct tokenizer_config.json (added_tokens_decoder, chat_template); "
    "date line as in 3.2/3.3 (strftime_now), pinned through date_string",
}
# What each family's server returns as reasoning / content (byte-exact, as the parsers split it):
# Qwen3 generates `<think>\n…\n</think>\n\n…`; R1 continues after the prompt's `<think>\n`.
ANSWERS = {
    "kimi_k2_5": ("The user wants 2 + 2. That is 4.", " The answer is 4."),
    "qwen3": ("\nThe user wants 2 + 2. That is 4.\n", "\n\n The answer is 4."),
    "deepseek_r1": ("The user wants 2 + 2. That is 4.\n", "\n\n The answer is 4."),
    "deepseek_r1_0528": ("\nThe user wants 2 + 2. That is 4.\n", "\n\n The answer is 4."),
    "llama3": ("", " The answer is 4."),
}
MULTI_TURN = [
    {"role": "system", "content": "You are a careful tutor."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": " The answer is 4."},
    {"role": "user", "content": "And 4 + 2?"},
]
CASES = [(family, case) for family in FAMILIES for case in ("single", "multi", "tools")]
# Template variables per family, as target.chat would hold them (Llama: the date pinned).
CHAT = {"llama3": ChatSettings(chat_template_kwargs={"date_string": "26 Jul 2024"})}
ADD = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
        },
    }
]
ARGUMENTS = '{"a": 2, "b": 3}'


def tool_call_record(family: str, tokenizer) -> dict:
    """A turn that calls `add`, with the server ids the family's documented tokens give.
    Kimi-K2.5's tool-call section ends its reasoning with no </think>; Llama-3.1's call ends in <|eom_id|>."""
    fam, target = FAMILIES[family], FAMILIES[family].target
    reasoning = "I should add." if target["think_open"] else ""
    text = reasoning + ("" if family in ("kimi_k2_5", "llama3") else target["think_close"])
    if family in ("qwen3", "deepseek_r1_0528"):
        text = target["think_open"] + text
    text += fam.tool_call.format(name="add", arguments=ARGUMENTS) + fam.tool_call_end
    calls = [{"id": "call_0", "type": "function", "function": {"name": "add", "arguments": ARGUMENTS}}]
    return record(
        f"{family}-tools",
        [{"role": "user", "content": "Add 2 and 3."}],
        reasoning,
        "",
        finish_reason="tool_calls",
        tools=json.dumps(ADD),
        tool_calls=json.dumps(calls),
        completion_token_ids=tokenizer.encode(text, add_special_tokens=False),
    )


def make_record(family: str, case: str, tokenizer=None) -> dict:
    reasoning, content = ANSWERS[family]
    if case == "tools":
        return tool_call_record(family, tokenizer)
    if case == "single":
        return record(f"{family}-single", [{"role": "user", "content": "What is 2 + 2?"}], reasoning, content)
    return record(
        f"{family}-multi",
        MULTI_TURN,
        reasoning.replace("2 + 2", "4 + 2").replace("4.", "6."),
        content.replace("4.", "6."),
    )


def reconstruct(family: str, tokenizer, rec: dict) -> tuple[list[int], list[int]]:
    target = TargetConfig(**FAMILIES[family].target)
    facts = token_facts(tokenizer, target, "/nonexistent")
    result = Reconstructor(tokenizer, facts, ReconstructConfig(), CHAT.get(family)).run([rec])
    assert result.rejects == [], result.rejects
    return result.rows["input_ids"][0], result.rows["loss_mask"][0]


def expected_supervised(family: str, rec: dict, tokenizer) -> str:
    target = FAMILIES[family].target
    if rec["tool_calls"]:  # the server's ids, plus the forced <think> of the prompt where there is one
        forced = target["think_open"] if family in ("kimi_k2_5", "deepseek_r1") else ""
        return forced + tokenizer.decode(rec["completion_token_ids"], skip_special_tokens=False)
    if target["think_open"] is None:
        return rec["content"] + target["end_of_turn"]
    return target["think_open"] + rec["reasoning"] + target["think_close"] + rec["content"] + target["end_of_turn"]


def compact_json(obj: dict) -> str:
    """One key per line (ids and mask each on one line), so a diff shows which part moved."""
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in obj.items())
    return "{\n" + body + "\n}\n"


@pytest.mark.parametrize("family,case", CASES)
def test_reconstruction_matches_the_golden_file(family, case, family_tokenizers):
    tokenizer = family_tokenizers[family]
    path = GOLDEN / f"reconstruct-{family}-{case}.json"
    if os.environ.get("EAGLE3_REGEN_GOLDEN"):
        rec = make_record(family, case, tokenizer)
        ids, mask = reconstruct(family, tokenizer, rec)
        fields = (
            "sample_id",
            "messages",
            "reasoning",
            "content",
            "finish_reason",
            "tools",
            "tool_calls",
            "completion_token_ids",
        )
        golden = {
            "source": SOURCES[family],
            "family": family,
            "case": case,
            "record": {k: rec[k] for k in fields if rec[k] is not None},
            "text": tokenizer.decode(ids),
            "supervised_text": expected_supervised(family, rec, tokenizer),
            "ids": ids,
            "mask": mask,
        }
        path.write_text(compact_json(golden), encoding="utf-8")
    golden = json.loads(path.read_text(encoding="utf-8"))
    ids, mask = reconstruct(family, tokenizer, record(**golden["record"]))
    assert ids == golden["ids"]
    assert mask == golden["mask"]
    assert tokenizer.decode(ids) == golden["text"]


@pytest.mark.parametrize("family,case", CASES)
def test_decoding_the_masked_span_gives_back_think_reasoning_answer_and_end_byte_exact(family, case, family_tokenizers):
    tokenizer = family_tokenizers[family]
    rec = make_record(family, case, tokenizer)
    ids, mask = reconstruct(family, tokenizer, rec)
    supervised = [t for t, m in zip(ids, mask) if m]
    assert tokenizer.decode(
        supervised, skip_special_tokens=False, clean_up_tokenization_spaces=False
    ) == expected_supervised(family, rec, tokenizer)


@pytest.mark.parametrize("family", [f for f in FAMILIES if FAMILIES[f].target["think_open"]])
def test_think_tokens_stand_as_their_single_real_ids(family, family_tokenizers):
    target = FAMILIES[family].target
    ids, mask = reconstruct(family, family_tokenizers[family], make_record(family, "single"))
    assert ids.count(target["think_open_id"]) == 1 and ids.count(target["think_close_id"]) == 1
    assert mask[ids.index(target["think_open_id"])] == 1
    assert ids[-1] == target["end_of_turn_id"] and mask[-1] == 1


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_tools_are_rendered_into_the_prompt_and_the_call_is_supervised(family, family_tokenizers):
    tokenizer = family_tokenizers[family]
    rec = make_record(family, "tools", tokenizer)
    ids, mask = reconstruct(family, tokenizer, rec)
    prompt = tokenizer.decode([t for t, m in zip(ids, mask) if not m], skip_special_tokens=False)
    assert "add" in prompt and "Add 2 and 3." in prompt
    assert ids[-len(rec["completion_token_ids"]) :] == rec["completion_token_ids"]
    assert all(mask[-len(rec["completion_token_ids"]) :])


def test_a_llama_tool_call_turn_ends_in_eom_and_plain_turns_in_eot(family_tokenizers):
    tokenizer = family_tokenizers["llama3"]
    call, _ = reconstruct("llama3", tokenizer, make_record("llama3", "tools", tokenizer))
    plain, _ = reconstruct("llama3", tokenizer, make_record("llama3", "single"))
    assert call[-1] == 128008 and plain[-1] == 128009  # <|eom_id|>, <|eot_id|>


def test_the_llama_date_is_pinned_by_the_template_kwargs_not_taken_from_today(family_tokenizers):
    tokenizer = family_tokenizers["llama3"]
    messages = [{"role": "user", "content": "Hi"}]
    pinned = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, **CHAT["llama3"].chat_template_kwargs
    )
    today = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "Today Date: 26 Jul 2024\n" in pinned
    assert time.strftime("%d %b %Y") in today  # what the 3.2/3.3 templates do without it: another prompt tomorrow


def test_r1_0528_generates_its_own_think_open_and_supervises_it(family_tokenizers):
    tokenizer = family_tokenizers["deepseek_r1_0528"]
    ids, mask = reconstruct("deepseek_r1_0528", tokenizer, make_record("deepseek_r1_0528", "single"))
    prompt = tokenizer.decode([t for t, m in zip(ids, mask) if not m], skip_special_tokens=False)
    assert prompt.endswith("<｜Assistant｜>") and ids.count(128798) == 1 and mask[ids.index(128798)] == 1


def test_earlier_assistant_turns_are_prompt_and_carry_only_their_answer(family_tokenizers):
    tokenizer = family_tokenizers["qwen3"]
    ids, mask = reconstruct("qwen3", tokenizer, make_record("qwen3", "multi"))
    prompt = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "<|im_start|>assistant\n The answer is 4.<|im_end|>" in prompt
    assert prompt.count("<think>") == 0


def test_thinking_switched_off_by_the_template_supervises_only_the_answer(family_dirs, family_tokenizers):
    tokenizer = family_tokenizers["qwen3"]
    facts = token_facts(tokenizer, TargetConfig(**FAMILIES["qwen3"].target), family_dirs["qwen3"])
    chat = ChatSettings(chat_template_kwargs={"enable_thinking": False})
    result = Reconstructor(tokenizer, facts, ReconstructConfig(), chat).run(
        [
            record("off", [{"role": "user", "content": "What is 2 + 2?"}], "", " 4."),
            record("mixed", [{"role": "user", "content": "What is 2 + 2?"}], "thinking anyway", " 4."),
        ]
    )
    ids, mask = result.rows["input_ids"][0], result.rows["loss_mask"][0]
    assert tokenizer.decode(ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n 4.<|im_end|>")
    assert tokenizer.decode([t for t, m in zip(ids, mask) if m]) == " 4.<|im_end|>"
    assert [r["reason"] for r in result.rejects] == ["reasoning_after_closed_think"]
