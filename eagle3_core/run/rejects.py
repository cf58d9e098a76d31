"""The one reject counter: every dropped row is counted under a short reason code.

A stage counts into a ``Rejects`` and hands it to its manifest (the driver records it at ``complete``),
which records the same two things for every stage: ``counts["rejected"]`` (the total) and
``details["reject_reasons"]`` (reason -> rows, sorted by reason). Shard stats and worker
processes carry it as the plain dict ``as_dict()`` returns, and ``merge`` adds them up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping


class Rejects:
    """Rows dropped, per reason code."""

    def __init__(self, reasons: Mapping[str, int] | None = None) -> None:
        self.reasons: Counter[str] = Counter(reasons or {})

    def add(self, reason: str, rows: int = 1) -> None:
        self.reasons[reason] += rows

    def merge(self, other: Rejects | Mapping[str, int]) -> Rejects:
        self.reasons.update(other.reasons if isinstance(other, Rejects) else other)
        return self

    @classmethod
    def total_of(cls, parts: Iterable[Rejects | Mapping[str, int]]) -> Rejects:
        found = cls()
        for part in parts:
            found.merge(part)
        return found

    @property
    def total(self) -> int:
        return sum(self.reasons.values())

    def as_dict(self) -> dict[str, int]:
        """reason -> rows, sorted by reason (the manifest's ``details.reject_reasons``)."""
        return {reason: int(n) for reason, n in sorted(self.reasons.items()) if n}

    def __repr__(self) -> str:
        return f"Rejects({self.as_dict()})"
