"""vLLM's /metrics counters: parsed, summed over engines, measured as before/after deltas."""

from eagle3_core.stages.evaluate.metrics import SpecCounters, parse_prometheus

SNAPSHOT = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="toy"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="toy"} 30.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="toy"} 14.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="toy",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="toy",position="1"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="toy",position="2"} 2.0
vllm:generation_tokens_total{engine="0",model_name="to\\"y"} 54.0
vllm:spec_decode_num_drafts_created 1.7e9
"""


def test_parser_reads_names_labels_and_values_and_skips_comments():
    samples = parse_prometheus(SNAPSHOT)
    assert samples[0] == ("vllm:spec_decode_num_drafts_total", {"engine": "0", "model_name": "toy"}, 10.0)
    assert samples[6][1]["model_name"] == 'to\\"y'
    assert len(samples) == 8


def test_acceptance_length_counts_the_bonus_token_and_rate_does_not():
    c = SpecCounters.from_prometheus(SNAPSHOT)
    assert c.acceptance_length == 1 + 14 / 10
    assert c.acceptance_rate == 14 / 30
    assert c.per_position(3) == [0.8, 0.4, 0.2]


def test_a_measurement_is_the_difference_of_two_snapshots():
    before = SpecCounters.from_prometheus(SNAPSHOT)
    after = SpecCounters.from_prometheus(
        SNAPSHOT.replace("10.0", "12.0")
        .replace('"0"} 8.0', '"0"} 10.0')
        .replace("14.0", "16.0")
        .replace("30.0", "36.0")
    )
    delta = after - before
    assert (delta.drafts, delta.draft_tokens, delta.accepted) == (2, 6, 2)
    assert delta.per_position(3) == [1.0, 0.0, 0.0]
    assert delta.acceptance_length == 2.0


def test_engines_are_summed_and_a_server_without_drafts_reports_no_length():
    two = SNAPSHOT + 'vllm:spec_decode_num_drafts_total{engine="1",model_name="toy"} 5.0\n'
    assert SpecCounters.from_prometheus(two).drafts == 15
    empty = SpecCounters.from_prometheus("vllm:generation_tokens_total 3.0\n")
    assert empty.acceptance_length is None and empty.per_position(2) == [None, None]


def test_offline_steps_fill_the_same_counters():
    c = SpecCounters()
    c.record_step(3, 3)
    c.record_step(3, 0)
    c.record_step(3, 1)
    assert c.summary(3)["accepted_per_position"] == [2, 1, 1]
    assert c.acceptance_length == 1 + 4 / 3
