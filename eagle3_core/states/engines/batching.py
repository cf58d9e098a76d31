"""Length-bucketed batches under a token budget, so padding stays small.

Samples are sorted by length (longest first) and packed greedily: a batch takes the next
sample while ``batch_size * longest <= max_tokens`` (padding counted). A sample longer than
the budget runs alone. Sorting neighbours of similar length keeps the padding share to a few
percent on realistic length spreads (see benchmarks/extract.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Batch:
    """Positions (into the shard's sample list) of the samples in one forward pass."""

    members: tuple[int, ...]
    longest: int
    tokens: int  # real tokens, padding excluded
    padded: bool = True  # False where the engine packs sequences itself (vLLM)

    @property
    def padded_tokens(self) -> int:
        """Tokens the forward pass computes, padding included."""
        return self.longest * len(self.members) if self.padded else self.tokens


def bucket_batches(lengths: list[int], max_tokens: int) -> list[Batch]:
    """Cover every non-empty sample exactly once; zero-length samples need no forward pass."""
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (-lengths[i], i))
    batches: list[Batch] = []
    members: list[int] = []
    for i in order:
        longest = lengths[members[0]] if members else lengths[i]
        if members and (len(members) + 1) * longest > max_tokens:
            batches.append(_batch(members, lengths))
            members = []
        members.append(i)
    if members:
        batches.append(_batch(members, lengths))
    return batches


def _batch(members: list[int], lengths: list[int]) -> Batch:
    return Batch(tuple(members), lengths[members[0]], sum(lengths[i] for i in members))


def padding_share(batches: list[Batch]) -> float:
    """Padding tokens / tokens computed."""
    padded = sum(b.padded_tokens for b in batches)
    return 0.0 if padded == 0 else 1.0 - sum(b.tokens for b in batches) / padded
