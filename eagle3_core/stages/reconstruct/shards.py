"""Input planning and the per-shard unit of work: the unit of resume and of parallelism.

The accepted generation shards are read in sorted file order as one row sequence; output
shard k holds input rows ``[k * shard_rows, (k + 1) * shard_rows)``. For each output shard:

```
sequences/part-00007.parquet          the rows (contract in docs/stages/reconstruct.md)
sequences/stats/part-00007.json       its counts, rejects and server mismatches
```

Both are written atomically, the parquet first and the stats file LAST: a shard is finished
exactly when its stats file exists, so a killed run redoes at most the shard it was in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_core.contracts import generations
from eagle3_core.errors import InputError
from eagle3_core.rebuild.build import BatchResult, Reconstructor
from eagle3_core.run.fsio import atomic_path, read_json, write_json_atomic

INPUT_COLUMNS = (
    "sample_id",
    "messages",
    "reasoning",
    "content",
    "finish_reason",
    "prompt_token_ids",
    "completion_token_ids",
    "tools",
    "tool_calls",
)


@dataclass(frozen=True)
class InputPlan:
    """The accepted generation files, in order, with their row counts."""

    files: tuple[str, ...]
    rows: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.rows)


@dataclass(frozen=True)
class ShardJob:
    index: int
    start: int
    stop: int

    @property
    def name(self) -> str:
        return f"part-{self.index:05d}"


def plan_inputs(generations_dir: str | Path) -> InputPlan:
    """Every accepted shard and its row count; InputError when there is nothing to read."""
    files = generations.accepted_parts(generations_dir)
    plan = InputPlan(tuple(map(str, files)), tuple(generations.num_rows(f) for f in files))
    if plan.total == 0:
        raise InputError(
            f"the generation shards in {files[0].parent} hold no rows",
            path=str(files[0].parent),
            fix="run `eagle3 generate --out DIR` first and pass that DIR as --input",
        )
    return plan


def plan_shards(total: int, shard_rows: int) -> list[ShardJob]:
    return [ShardJob(i, start, min(start + shard_rows, total)) for i, start in enumerate(range(0, total, shard_rows))]


def read_rows(plan: InputPlan, start: int, stop: int) -> list[dict[str, Any]]:
    """Input rows ``[start, stop)`` across files, with the columns reconstruct reads (missing ones None)."""
    rows: list[dict[str, Any]] = []
    offset = 0
    for file, count in zip(plan.files, plan.rows):
        lo, hi = max(start, offset), min(stop, offset + count)
        if lo < hi:
            table = generations.read(file, list(INPUT_COLUMNS), optional=INPUT_COLUMNS[1:]).slice(lo - offset, hi - lo)
            rows += [{c: row.get(c) for c in INPUT_COLUMNS} for row in table.to_pylist()]
        offset += count
    return rows


def stats_path(out_dir: str | Path, job: ShardJob) -> Path:
    return Path(out_dir) / "stats" / f"{job.name}.json"


def shard_done(out_dir: str | Path, job: ShardJob) -> bool:
    return stats_path(out_dir, job).is_file() and (Path(out_dir) / f"{job.name}.parquet").is_file()


def load_stats(out_dir: str | Path, job: ShardJob) -> dict[str, Any]:
    return read_json(stats_path(out_dir, job))


def run_shard(job: ShardJob, plan: InputPlan, out_dir: str | Path, reconstructor: Reconstructor) -> dict[str, Any]:
    """Reconstruct one output shard, write it and its stats; return the stats."""
    records = read_rows(plan, job.start, job.stop)
    batch = reconstructor.cfg.batch_rows
    total = BatchResult()
    for i in range(0, len(records), batch):
        part = reconstructor.run(records[i : i + batch])
        for name, column in part.rows.items():
            total.rows[name] += column
        total.rejects += part.rejects
        total.mismatches += part.mismatches
        total.counts.update(part.counts)
    write_sequences(Path(out_dir) / f"{job.name}.parquet", total.rows)
    stats = {
        "shard": job.name,
        "start": job.start,
        "stop": job.stop,
        "counts": dict(total.counts),
        "rejects": total.rejects,
        "mismatches": total.mismatches,
    }
    write_json_atomic(stats_path(out_dir, job), stats)
    return stats


def write_sequences(path: Path, rows: dict[str, list]) -> None:
    """The sequences/ shard with the contract's columns (``contracts.sequences``; an empty shard keeps them)."""
    import pyarrow.parquet as pq

    from eagle3_core.contracts import sequences

    with atomic_path(path, record=True) as tmp:
        pq.write_table(sequences.table(rows), tmp)
