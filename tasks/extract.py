"""Prefect tasks of the extract stage: plan, one task per shard, finish.

Each shard task holds the host's GPU limit (``gpu:{hostname}``, one slot), so two runs on one
machine take turns with its accelerator instead of running out of memory together. The
loaded target is cached per process (eagle3_core.extract.engines), so consecutive shard
tasks reuse it; ``release_extract`` frees it.
"""

from __future__ import annotations

import socket

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.sync import concurrency

from eagle3_core.extract.config import ExtractConfig
from eagle3_core.extract.stage import ExtractPlan, extract_shard, finish_extract, plan_extract
from eagle3_core.manifest import StageManifest
from eagle3_core.target import TargetConfig
from tasks.common import PrefectReporter, publish_manifest, publish_table


def gpu_limit_name(host: str | None = None) -> str:
    """The global concurrency limit of one machine's accelerators: ``gpu:{hostname}``."""
    return f"gpu:{host or socket.gethostname()}"


def ensure_gpu_limit(name: str) -> None:
    """Create the host's GPU limit with one slot unless an operator already set it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
            except ObjectAlreadyExists:  # another run created it a moment ago
                pass


@task(name="extract-plan", cache_policy=NO_CACHE)
def plan_task(cfg: ExtractConfig, target: TargetConfig, sequences_dir: str, out_dir: str) -> ExtractPlan:
    """Sizes, layers, shards; prints the storage cost and refuses a run that cannot fit."""
    return plan_extract(cfg, target, sequences_dir, out_dir, reporter=PrefectReporter("extract"))


@task(name="extract-shard", cache_policy=NO_CACHE, task_run_name="extract-shard-{index:05d}")
def shard_task(
    plan: ExtractPlan, cfg: ExtractConfig, target: TargetConfig, index: int, limit_name: str
) -> dict[str, float]:
    """One shard (skipped when an earlier run finished it), holding the host's GPU slot."""
    with concurrency(limit_name, occupy=1, strict=True):
        return extract_shard(plan, cfg, target, index, reporter=PrefectReporter("extract"))


@task(name="extract-finish", cache_policy=NO_CACHE)
def finish_task(plan: ExtractPlan, reused: int, shard_rows: list[dict]) -> StageManifest:
    """index.parquet, the complete manifest, and the summary artifacts."""
    manifest = finish_extract(plan, reporter=PrefectReporter("extract"), reused=reused)
    publish_manifest(manifest, title="extract")
    publish_table(shard_rows, key="extract-shards", description="extract: tokens, padding and speed per shard")
    return manifest


@task(name="extract-release", cache_policy=NO_CACHE)
def release_task() -> None:
    """Free the cached target (GPU memory, a vLLM worker)."""
    from eagle3_core.extract.engines import release_engines

    release_engines()
