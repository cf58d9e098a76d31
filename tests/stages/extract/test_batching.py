"""Batches cover every sample once, stay under the token budget, and keep padding small."""

import random

from eagle3_core.stages.extract.plan import plan_shards
from eagle3_core.states.engines.batching import bucket_batches, padding_share
from tests.stages.extract.helpers import write_sequences


def test_every_sample_runs_once_within_the_budget():
    rng = random.Random(0)
    lengths = [rng.randint(1, 900) for _ in range(500)] + [0, 0, 3000]
    batches = bucket_batches(lengths, max_tokens=2048)
    members = sorted(i for b in batches for i in b.members)
    assert members == [i for i, n in enumerate(lengths) if n > 0]
    assert all(b.padded_tokens <= 2048 or len(b.members) == 1 for b in batches)
    assert any(len(b.members) == 1 and b.longest == 3000 for b in batches)


def test_bucketing_by_length_keeps_padding_under_five_percent_on_a_wide_spread():
    rng = random.Random(1)
    lengths = [int(rng.lognormvariate(6.5, 0.8)) + 1 for _ in range(2000)]
    assert padding_share(bucket_batches(lengths, max_tokens=16384)) < 0.05


def test_shards_are_deterministic_hold_whole_samples_and_group_like_lengths(tmp_path):
    write_sequences(tmp_path / "seq", [[30, 25, 40, 120, 8, 25], [21, 19]])
    first = plan_shards(tmp_path / "seq", 60, "h")
    assert first == plan_shards(tmp_path / "seq", 60, "h")
    assert [(s.part, s.rows) for s in first] == [
        ("part-00000.parquet", [4, 1, 5]),
        ("part-00000.parquet", [0]),
        ("part-00000.parquet", [2]),
        ("part-00000.parquet", [3]),
        ("part-00001.parquet", [1, 0]),
    ]
    assert [s.tokens for s in first] == [58, 30, 40, 120, 40]
    assert len({s.key for s in first}) == len(first)
    assert all(a.key != b.key for a, b in zip(first, plan_shards(tmp_path / "seq", 60, "other")))
