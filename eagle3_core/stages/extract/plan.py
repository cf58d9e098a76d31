"""The shard plan: which samples of sequences/ go into which hidden/ shard.

A shard holds rows of one ``part-*.parquet`` file (files in name order), taken in order of
length (shortest first, ties by row), up to ``shard_tokens`` tokens (one longer sample makes
a shard of its own). Samples of like length share a shard, so its length-bucketed batches
carry little padding (a shard of contiguous rows left 29% padding on log-normal lengths; see
benchmarks/extract.md), and a shard reads one file only. The plan depends only on the input
files and ``shard_tokens``, so a restarted run plans the same shards and can skip the
finished ones. Each shard carries a ``key`` (a hash of its
sample ids, lengths and the output config) that is stored in the shard file: a shard on disk
counts as finished only when its key matches.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import Field

from eagle3_core.base import StrictModel, stable_hash
from eagle3_core.contracts import sequences
from eagle3_core.errors import InputError


class ShardSpec(StrictModel):
    """One output shard: some rows of one sequences file, in the order they are stored."""

    index: int = Field(description="Shard number; the file is shard-{index:05d}.safetensors.")
    part: str = Field(description="Sequences file name (inside sequences_dir).")
    rows: list[int] = Field(description="Row numbers in that file, in shard order.")
    samples: int = Field(description="Samples in the shard.")
    tokens: int = Field(description="Tokens in the shard.")
    longest: int = Field(0, description="Tokens of the shard's longest sample.")
    key: str = Field(description="Hash of the shard's sample ids, lengths and the output config.")

    @property
    def name(self) -> str:
        return shard_name(self.index)


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.safetensors"


def plan_shards(sequences_dir: str | Path, shard_tokens: int, output_hash: str) -> list[ShardSpec]:
    """Cut every sequences file, in length order, into shards of at most ``shard_tokens`` tokens."""
    shards: list[ShardSpec] = []
    for part in sequences.parts(sequences_dir):
        ids, lengths = sequences.lengths(part)
        order = sorted(range(len(ids)), key=lambda i: (lengths[i], i))
        for rows in _cut(order, lengths, shard_tokens):
            key = stable_hash(
                {"ids": [ids[i] for i in rows], "lengths": [lengths[i] for i in rows], "out": output_hash}
            )
            shards.append(
                ShardSpec(
                    index=len(shards),
                    part=part.name,
                    rows=rows,
                    samples=len(rows),
                    tokens=sum(lengths[i] for i in rows),
                    longest=max(lengths[i] for i in rows),
                    key=key,
                )
            )
    return shards


def _cut(order: list[int], lengths: list[int], shard_tokens: int) -> list[list[int]]:
    groups: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for i in order:
        if current and tokens + lengths[i] > shard_tokens:
            groups.append(current)
            current, tokens = [], 0
        current.append(i)
        tokens += lengths[i]
    if current:
        groups.append(current)
    return groups


@functools.lru_cache(maxsize=1)
def _read_part(path: str, mtime_ns: int):
    """One sequences file, kept while its shards (consecutive in the plan) are read."""
    return sequences.read(path, ["sample_id", "input_ids", "loss_mask", "num_tokens"])


def load_shard_rows(sequences_dir: str | Path, shard: ShardSpec) -> list[tuple[str, list[int], list[int]]]:
    """(sample_id, input_ids, loss_mask) of the shard's rows, checked against the contract."""
    path = Path(sequences_dir) / shard.part
    mtime = path.stat().st_mtime_ns if path.exists() else 0  # a deleted part: the reader names it
    table = _read_part(str(path), mtime).take(shard.rows)
    rows = list(zip(table["sample_id"].to_pylist(), table["input_ids"].to_pylist(), table["loss_mask"].to_pylist()))
    for (sample_id, ids, mask), declared in zip(rows, table["num_tokens"].to_pylist()):
        if not len(ids) == len(mask) == declared:
            raise InputError(
                f"input_ids has {len(ids)} tokens, loss_mask {len(mask)}, num_tokens says {declared}",
                sample_id=sample_id,
                path=str(path),
                fix="re-run `eagle3 reconstruct`",
            )
    return rows
