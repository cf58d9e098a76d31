"""The figures of one generate run: outcomes, reasons, sources, latency, tokens.

Every input row read lands in exactly one outcome: ``accepted``, ``rejected`` (final, the
prompt's own answer settled it), ``skipped`` (a repeat of a prompt already seen in this input) or
``open`` (not settled: a server failed it, or the run stopped before its answer; ``endpoint/health.py``).
``open`` is what the others leave, so accepted + rejected + skipped + open == input always holds
for the input as read this time, and a complete run has open == 0. Rows finished by an earlier,
interrupted run count under their persisted outcome and again under ``resumed``.
Latencies are kept in a bounded reservoir, so memory does not grow with the dataset.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

from eagle3_core.endpoint.health import is_open
from eagle3_core.run.rejects import Rejects

RESERVOIR = 100_000


class RunStats:
    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.reject_reasons = Rejects()  # final rejects
        self.open_reasons = Rejects()  # rows kept with an open reason (a rerun sends them)
        self.reasoning_sources: Counter[str] = Counter()
        self.finish_reasons: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.tokens: Counter[str] = Counter()
        self.input_rows = 0
        self.resumed = 0
        self.requests = 0
        self.turns = 0  # earlier turns answered (generate.turns: all), each one request or more
        self.turns_resumed = 0  # earlier turns an interrupted run had written, not asked again
        self._latencies: list[float] = []
        self._seen_latencies = 0
        self._rng = random.Random(0)
        self.started = time.monotonic()

    @property
    def done(self) -> int:
        return sum(self.outcomes.values())

    def accept(self, record: dict[str, Any]) -> None:
        self.outcomes["accepted"] += 1
        self.reasoning_sources[record["reasoning_source"] or "none"] += 1
        self.finish_reasons[record["finish_reason"] or "none"] += 1
        self.tokens["prompt"] += record["prompt_tokens"] or 0
        self.tokens["completion"] += record["completion_tokens"] or 0
        self._add_latency(record["latency_s"])

    def reject(self, reason: str) -> None:
        """A reject row written: final, or open when the server failed (``endpoint.health.is_open``)."""
        if is_open(reason):
            self.outcomes["open"] += 1
            self.open_reasons.add(reason)
        else:
            self.outcomes["rejected"] += 1
            self.reject_reasons.add(reason)

    @property
    def open(self) -> int:
        """Rows read and not settled: kept with an open reason, or cut off by a stop."""
        return self.input_rows - self.outcomes["accepted"] - self.outcomes["rejected"] - self.outcomes["skipped"]

    def open_line(self) -> str:
        """Why rows are open, as ``connection: 3, http_503: 1, cut off by the stop: 2``."""
        reasons = self.open_reasons.as_dict()
        parts = [f"{reason}: {n}" for reason, n in reasons.items()]
        cut = self.open - sum(reasons.values())
        return ", ".join(parts + ([f"unanswered: {cut}"] if cut else []))

    def skip(self) -> None:
        self.outcomes["skipped"] += 1

    def resume(self, outcome: str) -> None:
        self.outcomes[outcome] += 1
        self.resumed += 1

    def _add_latency(self, value: float) -> None:
        self._seen_latencies += 1
        if len(self._latencies) < RESERVOIR:
            self._latencies.append(value)
        else:
            slot = self._rng.randrange(self._seen_latencies)
            if slot < RESERVOIR:
                self._latencies[slot] = value

    def latency_percentiles(self) -> dict[str, float]:
        if not self._latencies:
            return {}
        ordered = sorted(self._latencies)
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
        return {
            "p50": round(pick(0.5), 4),
            "p90": round(pick(0.9), 4),
            "p99": round(pick(0.99), 4),
            "max": round(ordered[-1], 4),
        }

    def counts(self) -> dict[str, int]:
        return {
            "input": self.input_rows,
            "accepted": self.outcomes["accepted"],
            "rejected": self.outcomes["rejected"],
            "skipped": self.outcomes["skipped"],
            "open": self.open,
            "resumed": self.resumed,
            "length": self.finish_reasons["length"],
            "requests": self.requests,
            "turns": self.turns,
            "turns_resumed": self.turns_resumed,
            "retries": sum(self.retries.values()),
            "prompt_tokens": self.tokens["prompt"],
            "completion_tokens": self.tokens["completion"],
        }

    def details(self) -> dict[str, Any]:
        return {
            "reject_reasons": self.reject_reasons.as_dict(),
            "open_reasons": self.open_reasons.as_dict(),
            "reasoning_sources": dict(self.reasoning_sources),
            "finish_reasons": dict(self.finish_reasons),
            "retries_by_reason": dict(self.retries),
            "latency_s": self.latency_percentiles(),
        }
