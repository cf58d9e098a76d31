"""`target.history_supervised`: with `turns: all` the earlier answers in the last turn's prompt are the
target's own, and where the recipe says so they are trained on too; otherwise they stay prompt."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from eagle3_core.contracts.generations import stored_messages
from eagle3_core.rebuild.build import Reconstructor
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.target.config import ChatSettings, TargetConfig
from eagle3_core.target.tokenizer import token_facts
from tests.stages.reconstruct.families_more import MORE_FAMILIES
from tests.stages.reconstruct.records import record

FAMILY = "minimax_m2"  # its template keeps earlier reasoning (history_reasoning: keep)
HISTORY = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "4.", "reasoning": "Two and two.", "reasoning_content": "Two and two."},
    {"role": "user", "content": "And 3 + 3?"},
    {"role": "assistant", "content": "6.", "reasoning": "Three and three.", "reasoning_content": "Three and three."},
    {"role": "user", "content": "And 4 + 4?"},
]


def rebuilt(tokenizer, supervised: bool) -> tuple[list[int], list[int], dict]:
    # the text path, so the parser is taken to keep whitespace: what is tested is the history's mask
    fields = {"history_supervised": supervised, "parser_strips_whitespace": False}
    target = TargetConfig(**MORE_FAMILIES[FAMILY].target | fields)
    facts = token_facts(tokenizer, target, "/nonexistent")
    builder = Reconstructor(tokenizer, facts, ReconstructConfig(), ChatSettings(), target)
    rec = record("s", stored_messages(HISTORY), "Four and four.", "8.")
    result = builder.run([rec])
    assert result.rejects == [], result.rejects
    return result.rows["input_ids"][0], result.rows["loss_mask"][0], result.counts


def supervised_text(tokenizer, ids: list[int], mask: list[int]) -> list[str]:
    """The supervised runs of ``ids``, decoded."""
    runs, run = [], []
    for token, bit in zip(ids + [0], mask + [0]):
        if bit:
            run.append(token)
        elif run:
            runs.append(tokenizer.decode(run))
            run = []
    return runs


def test_the_history_stays_prompt_unless_the_recipe_supervises_it(family_tokenizers):
    tokenizer = family_tokenizers[FAMILY]
    ids, mask, counts = rebuilt(tokenizer, supervised=False)
    runs = supervised_text(tokenizer, ids, mask)
    assert runs == ["<think>", "Four and four.</think>8.[e~["], "the forced <think> and the last answer only"
    assert counts["history_turns_supervised"] == 0


def test_a_supervised_history_trains_on_each_earlier_answer_as_the_template_renders_it(family_tokenizers):
    tokenizer = family_tokenizers[FAMILY]
    plain_ids, plain_mask, _ = rebuilt(tokenizer, supervised=False)
    ids, mask, counts = rebuilt(tokenizer, supervised=True)
    assert ids == plain_ids, "the switch changes the mask, never the ids"
    runs = supervised_text(tokenizer, ids, mask)
    assert len(runs) == 4 and runs[-2:] == supervised_text(tokenizer, plain_ids, plain_mask)
    for run, (reasoning, answer) in zip(runs, [("Two and two.", "4."), ("Three and three.", "6.")]):
        # what the target wrote after its generation prompt: reasoning, close, answer, end of turn
        assert run == f"{reasoning}\n</think>\n\n{answer}[e~[", run
        assert "]~b]ai" not in run and "user" not in run, "the role header is prompt"
    assert (counts["history_turns_supervised"], counts["history_turns_unplaced"]) == (2, 0)


def test_supervising_a_history_whose_reasoning_the_template_drops_is_a_config_error():
    with pytest.raises(ValidationError, match="target.history_supervised trains on earlier turns"):
        TargetConfig(history_supervised=True, history_reasoning="drop")
