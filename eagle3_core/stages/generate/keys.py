"""Sample keys in memory at 8 bytes each: the one thing in generate that grows with the dataset.

A sample id becomes a 63-bit integer (``key64``: blake2b; two prompts clash with odds about
n^2 / 2^64, 5e-8 at a million). ``KeySet`` and ``PersistedKeys`` hold them in a fraction of what
a Python ``set[int]`` and the ``{sample_id: outcome}`` dict a resume used to build took; measured
at 1M prompts in benchmarks/generate.md, "Memory at a million prompts".

- ``KeySet``: a sorted int64 array plus a small set of recent keys, merged into the array every
  ``MERGE_EVERY`` adds (a merge costs one pass over the array: 16 merges at a million keys).
- ``PersistedKeys``: the keys of every durable row with its outcome, built once at resume from
  the shards, looked up by binary search.
"""

from __future__ import annotations

import hashlib

import numpy as np

MERGE_EVERY = 65_536  # recent keys kept in a Python set (~5 MB) before they join the array


def key64(sample_id: str) -> int:
    """A sample id as a non-negative 63-bit integer (fits an int64 array)."""
    return int.from_bytes(hashlib.blake2b(sample_id.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def _found(ordered: np.ndarray, key: int) -> int:
    """The index of ``key`` in ``ordered``, or -1."""
    i = int(np.searchsorted(ordered, key))
    return i if i < len(ordered) and ordered[i] == key else -1


class KeySet:
    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=np.int64)
        self._recent: set[int] = set()

    def __contains__(self, key: int) -> bool:
        return key in self._recent or _found(self._sorted, key) >= 0

    def add(self, key: int) -> None:
        self._recent.add(key)
        if len(self._recent) >= MERGE_EVERY:
            recent = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
            self._sorted = np.union1d(self._sorted, recent)
            self._recent = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)


class PersistedKeys:
    """Outcome (``accepted``/``rejected``) per durable sample key; accepted wins a key in both."""

    OUTCOMES = ("rejected", "accepted")

    def __init__(self, rejected: np.ndarray, accepted: np.ndarray) -> None:
        every = np.concatenate([rejected, accepted])
        outcome = np.concatenate([np.zeros(len(rejected), np.uint8), np.ones(len(accepted), np.uint8)])
        order = np.lexsort((outcome, every))  # by key, then rejected before accepted
        every, outcome = every[order], outcome[order]
        last = np.ones(len(every), dtype=bool)
        last[:-1] = every[1:] != every[:-1]  # the last of each key's run: accepted when there is one
        self._keys, self._outcome = every[last], outcome[last]

    def get(self, key: int) -> str | None:
        i = _found(self._keys, key)
        return None if i < 0 else self.OUTCOMES[self._outcome[i]]

    def outcome(self, sample_id: str) -> str | None:
        return self.get(key64(sample_id))

    def __len__(self) -> int:
        return len(self._keys)


def key_array(sample_ids) -> np.ndarray:
    """``key64`` of each non-null id, as an int64 array (no Python list in between)."""
    return np.fromiter((key64(s) for s in sample_ids if s is not None), dtype=np.int64)
