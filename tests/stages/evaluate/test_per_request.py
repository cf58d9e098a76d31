"""vLLM's per-request verify steps placed in their answers: every figure here is hand-computed.

Each answer is a response body in vLLM 0.32's shape (``RequestSpecDecodeMetrics.to_dict``,
``vllm/v1/metrics/stats.py``), parsed by the endpoint client's own parser. The ids that split phases
are the test's own (9 closes the reasoning, 7 opens a tool call), as a recipe would name them.
"""

from __future__ import annotations

import pytest

from eagle3_core.chat.parse import parse_completion
from eagle3_core.stages.evaluate.metrics import SpecCounters
from eagle3_core.stages.evaluate.per_request import (
    PhaseMarkers,
    ServedAnswer,
    phase_markers,
    report_context_block,
    summarize,
)
from eagle3_core.target.config import TargetConfig, Token

CLOSE, TOOL, K = 9, 7, 3
MARKERS = PhaseMarkers(think_close=(CLOSE,), tool_call_start=TOOL)


def answered(output: list[int], accepted: list[int], prompt_len: int = 10, drafted: list[int] | None = None, **msg):
    """The parsed answer of one vLLM response carrying its steps (k = 3)."""
    drafted = drafted or [K] * len(accepted)
    histogram = [accepted.count(j) for j in range(K + 1)]
    block = {
        "mean_acceptance_length": 1 + sum(accepted) / len(accepted) if accepted else 1.0,
        "draft_acceptance_rate": sum(accepted) / sum(drafted) if drafted else 0.0,
        "acceptance_histogram": histogram,
        "num_spec_steps": len(accepted),
        "num_accepted_draft_tokens": sum(accepted),
        "num_draft_tokens": sum(drafted),
        "num_spec_tokens": K,
        "per_step_accepted": accepted or None,
        "per_step_drafted": drafted or None,
    }
    body = {
        "choices": [{"message": {"content": "x", **msg}, "finish_reason": "stop", "token_ids": output}],
        "prompt_token_ids": list(range(prompt_len)),
        "metrics": {"time_to_first_token_ms": None, "speculative_decoding": block},
    }
    return parse_completion(body)


# A: prompt 10, reasoning closed at 5, cut by max_tokens at 10 tokens: steps at 1 (writes 1-3), 4 (4),
# 5 (5-8), 9 (9-10, cut after 9). B: prompt 300, close at 2, tool call from 4: steps at 1, 2, 4 (writes 4-7).
# C: a one-token answer: no step.
A = answered([1, 2, 3, 4, 5, CLOSE, 6, 6, 6, 6], [2, 0, 3, 1], reasoning="r")
B = answered([1, 2, CLOSE, 3, TOOL, 5, 5, 5], [0, 1, 3], prompt_len=300, reasoning="r")
C = answered([6], [], prompt_len=5)


def figures(completions, markers=MARKERS, edges=(256,), metrics=None) -> dict:
    metrics = metrics or SpecCounters(drafts=7, draft_tokens=21, accepted=10)
    return summarize(completions, markers, K, list(edges), metrics)


def test_the_prefill_writes_token_zero_and_each_step_starts_after_the_tokens_the_earlier_ones_wrote():
    assert [s.position for s in ServedAnswer.of(A).placed()] == [1, 4, 5, 9]
    assert [s.position for s in ServedAnswer.of(B).placed()] == [1, 2, 4]
    assert ServedAnswer.of(C).placed() == []


def test_the_overall_figure_is_one_plus_accepted_over_steps_of_every_answer_and_equals_the_counters():
    block = figures([A, B, C, None])  # None: a failed request
    assert (block["answered"], block["requests"], block["requests_without_steps"]) == (3, 3, 1)
    assert (block["drafts"], block["accepted_tokens"]) == (7, 10)
    assert block["acceptance_length"] == pytest.approx(1 + 10 / 7)
    assert block["agreement_with_metrics"] == {
        "metrics_acceptance_length": pytest.approx(1 + 10 / 7),
        "metrics_drafts": 7,
        "difference": 0.0,
    }
    assert block["unplaced_tokens"] == 0  # A's last step was cut (11 written, 10 kept): nothing unplaced


def test_phases_split_at_the_think_close_and_the_tool_call_start():
    # reasoning: A at 1 and 4 (2 + 0), B at 1 (0); answer: A at 5 and 9 (3 + 1), B at 2 (1); tool call: B at 4
    assert figures([A, B, C])["by_phase"] == {
        "reasoning": {"drafts": 3, "accepted_tokens": 2, "acceptance_length": pytest.approx(1 + 2 / 3)},
        "answer": {"drafts": 3, "accepted_tokens": 5, "acceptance_length": pytest.approx(1 + 5 / 3)},
        "tool_call": {"drafts": 1, "accepted_tokens": 3, "acceptance_length": 4.0},
    }


def test_a_target_that_does_not_reason_has_answer_and_tool_call_only():
    markers = PhaseMarkers(think_close=None, tool_call_start=TOOL)
    phases = figures([A, B], markers)["by_phase"]
    assert set(phases) == {"answer", "tool_call"} and phases["answer"]["drafts"] == 6


def test_an_answer_without_its_think_close_is_reasoning_when_the_server_read_reasoning_in_it():
    cut = answered([1, 2, 3, 4, 5], [3], reasoning="half a thought")
    plain = answered([1, 2, 3, 4, 5], [3])
    assert list(figures([cut])["by_phase"]) == ["reasoning"]
    assert list(figures([plain])["by_phase"]) == ["answer"]


def test_a_marker_of_several_ids_is_found_where_it_starts():
    harmony = PhaseMarkers(think_close=(5, 6, 7), tool_call_start=None)
    answer = ServedAnswer.of(answered([1, 5, 6, 2, 5, 6, 7, 3, 3, 3], [1, 0, 1, 2]))
    assert harmony.bounds(answer) == (4, None)  # 5, 6 at 1 is not the marker; 5, 6, 7 at 4 is
    assert figures([answered([1, 5, 6, 2, 5, 6, 7, 3, 3, 3], [1, 0, 1, 2])], harmony)["by_phase"] == {
        "reasoning": {"drafts": 2, "accepted_tokens": 1, "acceptance_length": 1.5},  # steps at 1 and 3
        "answer": {"drafts": 2, "accepted_tokens": 3, "acceptance_length": 2.5},  # steps at 4 and 6
    }


def test_steps_count_in_the_bucket_of_their_output_position_and_only_buckets_with_steps_are_shown():
    # 100 steps keeping all 3: at 1, 5, ..., 397; 64 of them before position 256
    long = answered([4] * 401, [3] * 100)
    rows = figures([long])["by_position"]
    assert [(r["label"], r["from"], r["to"], r["drafts"]) for r in rows] == [
        ("0-256", 0, 256, 64),
        ("256-1K", 256, 1024, 36),
    ]
    assert all(r["acceptance_length"] == 4.0 for r in rows)


def test_steps_count_in_the_bucket_of_their_context_the_prompt_and_the_output_known():
    # A's steps at 10 + (1, 4, 5, 9), B's at 300 + (1, 2, 4)
    rows = figures([A, B, C])["by_context"]
    assert [(r["label"], r["drafts"], r["accepted_tokens"]) for r in rows] == [("0-256", 4, 6), ("256+", 3, 4)]


def test_a_draft_position_counts_only_the_steps_that_drafted_that_far():
    # A and B: position 0 kept by 5 of 7 steps, 1 by 3, 2 by 2
    assert figures([A, B])["acceptance_per_position"] == pytest.approx([5 / 7, 3 / 7, 2 / 7])
    # near max_model_len vLLM drafts fewer: the second step drafted 1, so positions 1 and 2 have one step each
    short = answered([1, 2, 3, 4], [1, 0], drafted=[3, 1])
    assert figures([short])["acceptance_per_position"] == [0.5, 0.0, 0.0]


def test_the_spread_is_over_the_answers_own_acceptance_lengths_of_those_with_steps():
    spread = figures([A, B, C])["spread"]  # A 2.5, B 7/3; C has no step
    assert spread["requests"] == 2
    assert spread["p10"] == pytest.approx(7 / 3 + 0.1 * (2.5 - 7 / 3))
    assert spread["p50"] == pytest.approx((2.5 + 7 / 3) / 2)
    assert spread["p90"] == pytest.approx(7 / 3 + 0.9 * (2.5 - 7 / 3))
    assert figures([C])["spread"] is None and figures([C])["acceptance_length"] is None


def test_tokens_no_step_wrote_are_counted_not_placed():
    # one step keeping 1: the prefill's token and 2 more; 3 of the 6 tokens came from steps without drafts
    assert figures([answered([1, 2, 3, 4, 5, 6], [1])])["unplaced_tokens"] == 3


def test_answers_without_steps_or_ids_are_not_figures():
    no_block = parse_completion({"choices": [{"message": {"content": "x"}, "token_ids": [1, 2]}], "metrics": None})
    assert ServedAnswer.of(no_block) is None and ServedAnswer.of(None) is None
    block = figures([A, no_block])
    assert (block["answered"], block["requests"]) == (2, 1)


def test_the_by_context_block_from_steps_has_the_replays_shape_at_the_evaluated_k():
    answers = [ServedAnswer.of(A), ServedAnswer.of(B)]
    block = report_context_block(answers, K, [256], vllm=2.5)
    assert block["source"] == "vllm-per-request" and block["answers"] == 2 and block["k"] == K
    assert [(b["label"], b["drafts"], b["acceptance_length_by_k"]) for b in block["buckets"]] == [
        ("0-256", 4, {"3": 2.5}),
        ("256+", 3, {"3": pytest.approx(1 + 4 / 3)}),
    ]
    assert block["total"]["acceptance_length"] == pytest.approx(1 + 10 / 7)
    assert block["difference_from_vllm"] == pytest.approx(1 + 10 / 7 - 2.5)


def test_the_markers_come_from_the_recipe_checked_against_the_tokenizer(chat_target):
    markers, why = phase_markers(TargetConfig(path=str(chat_target)))
    assert why is None and markers.tool_call_start is None and len(markers.think_close) == 1
    wrong = TargetConfig(path=str(chat_target), tool_call_start=Token(text="<tool_call>", id=151657))
    markers, why = phase_markers(wrong)
    assert markers is None and why.startswith("the target's phase markers do not fit its tokenizer (")
    assert "tool_call_start" in why
