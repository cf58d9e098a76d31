"""The compact key sets answer exactly as Python's set and dict would."""

import random

import numpy as np

from eagle3_core.stages.generate import keys
from eagle3_core.stages.generate.keys import KeySet, PersistedKeys, key64


def test_keyset_agrees_with_a_python_set_across_merges(monkeypatch):
    monkeypatch.setattr(keys, "MERGE_EVERY", 7)  # many merges on a small set
    rng = random.Random(0)
    compact, plain = KeySet(), set()
    for _ in range(500):
        key = rng.randrange(2**63) if rng.random() < 0.7 else rng.choice(sorted(plain) or [1])
        assert (key in compact) == (key in plain)
        compact.add(key)
        plain.add(key)
    assert len(compact) == len(plain) and all(k in compact for k in plain)


def test_persisted_keys_give_each_outcome_and_accepted_wins_a_key_in_both():
    a, b, c = key64("a"), key64("b"), key64("c")
    persisted = PersistedKeys(rejected=np.array([b, c, c], np.int64), accepted=np.array([a, b], np.int64))
    assert [persisted.get(k) for k in (a, b, c, key64("d"))] == ["accepted", "accepted", "rejected", None]
    assert len(persisted) == 3 and persisted.outcome("c") == "rejected"


def test_sample_ids_become_distinct_non_negative_63_bit_keys():
    values = {key64(f"sample-{i}") for i in range(10_000)}
    assert len(values) == 10_000 and 0 <= min(values) and max(values) < 2**63
