"""extract flow: sequences/ -> hidden/, one task per shard."""

from __future__ import annotations

from prefect import flow

from eagle3_core.extract.config import ExtractConfig
from eagle3_core.extract.stage import guard_extract
from eagle3_core.manifest import StageManifest
from eagle3_core.target import TargetConfig
from tasks.common import PrefectReporter
from tasks.extract import ensure_gpu_limit, finish_task, gpu_limit_name, plan_task, release_task, shard_task


@flow(name="extract", log_prints=True)
def extract_flow(cfg: ExtractConfig, target: TargetConfig, sequences_dir: str, out_dir: str) -> StageManifest:
    """The target's low/mid/high and final hidden states for every token, resumable per shard."""
    plan = plan_task(cfg, target, str(sequences_dir), str(out_dir))
    if plan.complete is not None:
        return plan.complete
    limit = gpu_limit_name()
    ensure_gpu_limit(limit)
    progress, rows, done = PrefectReporter("extract"), [], 0
    total = sum(s.tokens for s in plan.shards)
    try:
        with guard_extract(plan):  # an error: `failed` on disk; either way the folder's lock is let go
            for shard in plan.shards:  # in turn: the shards share one loaded target
                figures = shard_task(plan, cfg, target, shard.index, limit)
                done += shard.tokens
                progress.progress("extract", done, total, shard=shard.index)
                rows.append(_row(shard.name, figures))
    finally:
        release_task()
    return finish_task(plan, reused=sum(int(r["reused"]) for r in rows), shard_rows=rows)


def _row(name: str, figures: dict[str, float]) -> dict:
    padded = figures["computed_tokens"] or 1
    return {
        "shard": name,
        "tokens": int(figures["tokens"]),
        "reused": bool(figures["skipped"]),
        "padding_share": round(1 - figures["tokens"] / padded, 4),
        "tokens_per_s": None if figures["skipped"] else round(figures["tokens"] / max(figures["seconds"], 1e-9)),
    }
