"""Whether drafting changed the outputs (``evaluate/lossless.py``): greedy outputs compared id by id, sampled
outputs by their lengths, each arm hashed."""

import pytest

from eagle3_core.stages.evaluate.lossless import (
    _kolmogorov_tail,
    first_difference,
    greedy_comparison,
    ks_two_sample,
    lossless_block,
    output_hash,
)


def test_greedy_outputs_are_compared_prompt_by_prompt_and_the_first_parting_is_named():
    with_drafter = [[1, 2, 3], [4, 5, 6, 7], None, [8, 9]]
    without = [[1, 2, 3], [4, 5, 9, 7], [1], [8, 9, 10]]
    g = greedy_comparison(with_drafter, without)
    assert (g["compared"], g["identical"], g["differing"], g["identical_share"]) == (3, 1, 2, pytest.approx(1 / 3))
    assert g["first_differences"] == [
        {"prompt": 1, "position": 2, "with_drafter": 6, "without_drafter": 9},
        {"prompt": 3, "position": 2, "with_drafter": None, "without_drafter": 10},  # ended early: a prefix
    ]
    assert g["unit"] == "tokens"


def test_the_first_difference_of_a_prefix_is_where_the_shorter_one_ends():
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert first_difference("abc", "abd") == 2
    assert first_difference([5], [5]) == 1


def test_the_hash_is_of_the_ids_in_prompt_order_and_a_failed_request_counts():
    a = output_hash([[1, 2], [3]])
    assert a == output_hash([[1, 2], [3]]) and len(a) == 64
    assert a != output_hash([[3], [1, 2]]) and a != output_hash([[1, 2], None]) and output_hash([]) is None


def test_without_a_baseline_only_the_drafters_outputs_are_hashed_and_the_report_says_why():
    block = lossless_block([[1, 2]], None, temperature=0.0)
    assert block["greedy"] is None and block["output_hash"]["without_drafter"] is None
    assert block["output_hash"]["with_drafter"] == output_hash([[1, 2]])
    assert "evaluate.baseline: false" in block["not_compared"] and block["line"].startswith("Lossless: not compared")


def test_the_greedy_line_says_how_many_are_identical_and_where_the_others_part():
    block = lossless_block([[1, 2], [3, 4]], [[1, 2], [3, 5]], temperature=0.0)
    assert block["line"] == (
        "Lossless (greedy): 1 of 2 outputs identical with and without the drafter; first differences: prompt 1 at token 1."
    )


def test_kolmogorovs_tail_gives_the_classic_five_percent_point():
    assert _kolmogorov_tail(1.358) == pytest.approx(0.05, abs=1e-3)  # Kolmogorov's 5 % critical value
    assert _kolmogorov_tail(0.0) == 1.0 and _kolmogorov_tail(3.0) < 1e-6


def test_the_statistic_is_the_largest_gap_between_the_two_empirical_distributions():
    assert ks_two_sample([1, 2, 3, 4], [1, 2, 3, 4]) == {"statistic": 0.0, "p_value": 1.0}
    assert ks_two_sample([1, 2, 3, 4], [3, 4, 5, 6])["statistic"] == 0.5
    assert ks_two_sample([1, 2], [3, 4, 5])["statistic"] == 1.0


def test_sampled_answers_a_drafter_shortened_are_told_apart_from_one_that_did_not():
    """The community report's case: reasoning traces of ~34K tokens with the drafter against >= 59K without."""
    baseline = [[0] * n for n in range(59, 99)]
    shortened = [[0] * n for n in range(30, 70)]
    same = [[0] * n for n in range(60, 100)]
    cut = lossless_block(shortened, baseline, temperature=0.6)
    kept = lossless_block(same, baseline, temperature=0.6)
    assert cut["decoding"] == "sampled" and cut["greedy"] is None
    assert cut["sampled"]["ks"]["p_value"] < 1e-6 < kept["sampled"]["ks"]["p_value"]
    assert kept["sampled"]["ks"]["p_value"] > 0.5
    lengths = cut["sampled"]["lengths"]
    # the percentiles are the report's own rule (per_request.percentile, linear between the nearest two)
    assert (lengths["with_drafter"]["p50"], lengths["without_drafter"]["p50"]) == (49.5, 78.5)
    assert lengths["with_drafter"]["mean"] == pytest.approx(49.5)
    assert lengths["without_drafter"]["p90"] == pytest.approx(94.1)
    assert cut["line"].startswith("Lossless (sampled): output length mean 49.5 / p50 49.5 / p90 65.1 with the drafter")
