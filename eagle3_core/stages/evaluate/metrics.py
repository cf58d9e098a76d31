"""vLLM's speculative-decoding counters, read from its Prometheus ``/metrics`` text.

One definition everywhere (vLLM's): a *draft* is one proposal of up to k tokens for one
request at one step; ``accepted`` counts draft tokens the target kept; the bonus token the
target adds after each verification is not in ``accepted``, so

    acceptance length = 1 + accepted / drafts   (tokens per target forward, bonus included)
    acceptance rate   = accepted / draft_tokens (bonus excluded)
    per position i    = accepted_per_pos[i] / drafts (the share of drafts whose i-th token was kept)

Counters are cumulative for the server's lifetime, so a measurement is the difference of two
snapshots (``after - before``); the offline loop fills the same ``SpecCounters``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"

# name{labels} value [timestamp]; label values may hold escaped quotes.
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text exposition as (name, labels, value); comments skipped."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = {m["key"]: m["value"] for m in _LABEL.finditer(match["labels"] or "")}
        samples.append((match["name"], labels, float(match["value"])))
    return samples


@dataclass
class SpecCounters:
    """The counters of one measurement (or a cumulative snapshot), summed over engines."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    accepted_per_pos: dict[int, float] = field(default_factory=dict)
    generation_tokens: float = 0.0

    @classmethod
    def from_prometheus(cls, text: str) -> "SpecCounters":
        counters = cls()
        for name, labels, value in parse_prometheus(text):
            if name == DRAFTS:
                counters.drafts += value
            elif name == DRAFT_TOKENS:
                counters.draft_tokens += value
            elif name == ACCEPTED:
                counters.accepted += value
            elif name == GENERATION_TOKENS:
                counters.generation_tokens += value
            elif name == ACCEPTED_PER_POS and "position" in labels:
                pos = int(labels["position"])
                counters.accepted_per_pos[pos] = counters.accepted_per_pos.get(pos, 0.0) + value
        return counters

    def __sub__(self, before: "SpecCounters") -> "SpecCounters":
        positions = sorted(set(self.accepted_per_pos) | set(before.accepted_per_pos))
        return SpecCounters(
            drafts=self.drafts - before.drafts,
            draft_tokens=self.draft_tokens - before.draft_tokens,
            accepted=self.accepted - before.accepted,
            accepted_per_pos={
                p: self.accepted_per_pos.get(p, 0.0) - before.accepted_per_pos.get(p, 0.0) for p in positions
            },
            generation_tokens=self.generation_tokens - before.generation_tokens,
        )

    def record_step(self, proposed: int, accepted: int) -> None:
        """One verification of a ``proposed``-token draft whose first ``accepted`` tokens were kept."""
        assert 0 <= accepted <= proposed
        self.drafts += 1
        self.draft_tokens += proposed
        self.accepted += accepted
        for pos in range(accepted):
            self.accepted_per_pos[pos] = self.accepted_per_pos.get(pos, 0.0) + 1

    @property
    def acceptance_length(self) -> float | None:
        """1 + accepted / drafts (bonus token included); None when nothing was drafted."""
        return 1.0 + self.accepted / self.drafts if self.drafts else None

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / draft tokens (bonus token excluded)."""
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    def per_position(self, k: int) -> list[float | None]:
        """For positions 0..k-1: the share of drafts whose token at that position was kept."""
        if not self.drafts:
            return [None] * k
        return [self.accepted_per_pos.get(pos, 0.0) / self.drafts for pos in range(k)]

    def summary(self, k: int) -> dict:
        """The JSON figures of one measurement."""
        return {
            "drafts": int(self.drafts),
            "draft_tokens": int(self.draft_tokens),
            "accepted_tokens": int(self.accepted),
            "accepted_per_position": [int(self.accepted_per_pos.get(p, 0.0)) for p in range(k)],
            "acceptance_length": self.acceptance_length,
            "acceptance_rate": self.acceptance_rate,
            "acceptance_per_position": self.per_position(k),
        }
