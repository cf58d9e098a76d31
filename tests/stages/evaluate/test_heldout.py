"""Held-out prompts are read like generate reads them, and never overlap the training prompts."""

import json

import pytest

from eagle3_core.errors import InputError
from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.evaluate.heldout import check_no_overlap, load_heldout
from tests.stages.reconstruct.records import record
from tests.stages.reconstruct.records import write_generations as write_accepted


def write_generations(root, prompts):
    """generations/accepted of the contract's columns (``tests.stages.reconstruct.records``)."""
    rows = [record(f"s{i}", [{"role": "user", "content": p}], "r", "c") for i, p in enumerate(prompts)]
    return write_accepted(root, rows)


def write_prompts(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return PromptSource(input=str(path))


def test_rows_of_every_shape_are_read_and_unusable_ones_counted(tmp_path):
    source = write_prompts(
        tmp_path / "p.jsonl",
        [
            {"prompt": "What is 2 + 2?"},
            {"conversations": [{"from": "human", "value": "What is 3 + 4?"}]},
            {"messages": [{"role": "user", "content": "What is 5 - 1?"}, {"role": "assistant", "content": "4"}]},
            {"text": "no prompt here"},
        ],
    )
    prompts, skipped = load_heldout(source)
    assert [m[-1]["content"] for m in prompts] == ["What is 2 + 2?", "What is 3 + 4?", "What is 5 - 1?"]
    assert skipped == 1


def test_disjoint_prompts_pass_and_say_how_many_were_compared(tmp_path):
    gens = write_generations(tmp_path / "gen", ["What is 1 + 1?", "What is 9 - 3?"])
    prompts, _ = load_heldout(write_prompts(tmp_path / "p.jsonl", [{"prompt": "What is 2 + 2?"}]))
    assert check_no_overlap(prompts, gens) == 2


def test_a_training_prompt_among_the_held_out_ones_is_refused_whatever_its_shape(tmp_path):
    gens = write_generations(tmp_path / "gen", ["What is 1 + 1?", "What is 9 - 3?"])
    source = write_prompts(
        tmp_path / "p.jsonl",
        [{"prompt": "What is 2 + 2?"}, {"conversations": [{"from": "human", "value": "What is 9 - 3?"}]}],
    )
    prompts, _ = load_heldout(source)
    with pytest.raises(
        InputError, match=r"1 of 2 held-out prompts are training prompts \(first, row 1: 'What is 9 - 3\?'\)"
    ):
        check_no_overlap(prompts, gens)


def test_an_empty_generations_folder_is_an_error_not_a_pass(tmp_path):
    prompts, _ = load_heldout(write_prompts(tmp_path / "p.jsonl", [{"prompt": "x?"}]))
    with pytest.raises(InputError, match="no accepted generations"):
        check_no_overlap(prompts, tmp_path)
