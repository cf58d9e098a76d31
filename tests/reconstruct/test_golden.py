"""Golden files: the exact ids and loss mask of a single-turn and a multi-turn sample per family.

Each file in tests/golden/reconstruct-<family>-<case>.json holds the generation record, the
full text, ids and mask; the family tokenizers carry the REAL special ids (sources in
tests/reconstruct/families.py and in each file's ``source``). Regenerate after a deliberate
layout change with ``EAGLE3_REGEN_GOLDEN=1 pytest tests/reconstruct/test_golden.py`` and read
the diff: every id must be where the family's documented layout puts it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eagle3_core.reconstruct.build import Reconstructor
from eagle3_core.reconstruct.config import ReconstructConfig
from eagle3_core.reconstruct.tokenizer import token_facts
from eagle3_core.target import TargetConfig
from tests.reconstruct.families import FAMILIES
from tests.reconstruct.records import record

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SOURCES = {
    "kimi_k2_5": "issue 4 (ids 163606/163607/163586); moonshotai/Kimi-K2.5 tokenizer_config.json and chat_template.jinja",
    "qwen3": "Qwen/Qwen3-8B tokenizer_config.json (added_tokens_decoder, chat_template)",
    "deepseek_r1": "deepseek-ai/DeepSeek-R1 tokenizer_config.json (added_tokens_decoder, chat_template)",
    "llama3": "meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json (added_tokens_decoder, chat_template)",
}
# What each family's server returns as reasoning / content (byte-exact, as the parsers split it):
# Qwen3 generates `<think>\n…\n</think>\n\n…`; R1 continues after the prompt's `<think>\n`.
ANSWERS = {
    "kimi_k2_5": ("The user wants 2 + 2. That is 4.", " The answer is 4."),
    "qwen3": ("\nThe user wants 2 + 2. That is 4.\n", "\n\n The answer is 4."),
    "deepseek_r1": ("The user wants 2 + 2. That is 4.\n", "\n\n The answer is 4."),
    "llama3": ("", " The answer is 4."),
}
MULTI_TURN = [{"role": "system", "content": "You are a careful tutor."},
              {"role": "user", "content": "What is 2 + 2?"},
              {"role": "assistant", "content": " The answer is 4."},
              {"role": "user", "content": "And 4 + 2?"}]
CASES = [(family, case) for family in FAMILIES for case in ("single", "multi")]


def make_record(family: str, case: str) -> dict:
    reasoning, content = ANSWERS[family]
    if case == "single":
        return record(f"{family}-single", [{"role": "user", "content": "What is 2 + 2?"}], reasoning, content)
    return record(f"{family}-multi", MULTI_TURN, reasoning.replace("2 + 2", "4 + 2").replace("4.", "6."),
                  content.replace("4.", "6."))


def reconstruct(family: str, tokenizer, rec: dict) -> tuple[list[int], list[int]]:
    target = TargetConfig(**FAMILIES[family].target)
    facts = token_facts(tokenizer, target, "/nonexistent")
    result = Reconstructor(tokenizer, facts, ReconstructConfig()).run([rec])
    assert result.rejects == [], result.rejects
    return result.rows["input_ids"][0], result.rows["loss_mask"][0]


def expected_supervised(family: str, rec: dict) -> str:
    target = FAMILIES[family].target
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
        rec = make_record(family, case)
        ids, mask = reconstruct(family, tokenizer, rec)
        golden = {"source": SOURCES[family], "family": family, "case": case,
                  "record": {k: rec[k] for k in ("sample_id", "messages", "reasoning", "content", "finish_reason")},
                  "text": tokenizer.decode(ids), "supervised_text": expected_supervised(family, rec),
                  "ids": ids, "mask": mask}
        path.write_text(compact_json(golden), encoding="utf-8")
    golden = json.loads(path.read_text(encoding="utf-8"))
    ids, mask = reconstruct(family, tokenizer, record(**golden["record"]))
    assert ids == golden["ids"]
    assert mask == golden["mask"]
    assert tokenizer.decode(ids) == golden["text"]


@pytest.mark.parametrize("family,case", CASES)
def test_decoding_the_masked_span_gives_back_think_reasoning_answer_and_end_byte_exact(family, case, family_tokenizers):
    tokenizer = family_tokenizers[family]
    rec = make_record(family, case)
    ids, mask = reconstruct(family, tokenizer, rec)
    supervised = [t for t, m in zip(ids, mask) if m]
    assert tokenizer.decode(supervised, skip_special_tokens=False,
                            clean_up_tokenization_spaces=False) == expected_supervised(family, rec)


@pytest.mark.parametrize("family", [f for f in FAMILIES if FAMILIES[f].target["think_open"]])
def test_think_tokens_stand_as_their_single_real_ids(family, family_tokenizers):
    target = FAMILIES[family].target
    ids, mask = reconstruct(family, family_tokenizers[family], make_record(family, "single"))
    assert ids.count(target["think_open_id"]) == 1 and ids.count(target["think_close_id"]) == 1
    assert mask[ids.index(target["think_open_id"])] == 1
    assert ids[-1] == target["end_of_turn_id"] and mask[-1] == 1


def test_earlier_assistant_turns_are_prompt_and_carry_only_their_answer(family_tokenizers):
    tokenizer = family_tokenizers["qwen3"]
    ids, mask = reconstruct("qwen3", tokenizer, make_record("qwen3", "multi"))
    prompt = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "<|im_start|>assistant\n The answer is 4.<|im_end|>" in prompt
    assert prompt.count("<think>") == 0


def test_thinking_switched_off_by_the_template_supervises_only_the_answer(family_dirs, family_tokenizers):
    tokenizer = family_tokenizers["qwen3"]
    facts = token_facts(tokenizer, TargetConfig(**FAMILIES["qwen3"].target), family_dirs["qwen3"])
    cfg = ReconstructConfig(chat_template_kwargs={"enable_thinking": False})
    result = Reconstructor(tokenizer, facts, cfg).run([
        record("off", [{"role": "user", "content": "What is 2 + 2?"}], "", " 4."),
        record("mixed", [{"role": "user", "content": "What is 2 + 2?"}], "thinking anyway", " 4.")])
    ids, mask = result.rows["input_ids"][0], result.rows["loss_mask"][0]
    assert tokenizer.decode(ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n 4.<|im_end|>")
    assert tokenizer.decode([t for t, m in zip(ids, mask) if m]) == " 4.<|im_end|>"
    assert [r["reason"] for r in result.rejects] == ["reasoning_after_closed_think"]
