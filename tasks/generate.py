"""Prefect tasks of the generate stage: one task per batch of prompts, never one per request.

Prefect's per-task overhead (tens of milliseconds and several API calls) would cap a per-request
design far below a server's 128 requests/s; a batch of ``batch_size`` rows is one task, which
runs the core's async loop over the batch. Each batch holds slots of a global concurrency limit
named after every endpoint (``vllm:{host}:{port}``), so two runs against one server take turns
with its capacity instead of doubling its queue.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.sync import concurrency

from eagle3_core.generate.stage import Batch, GenerateRun
from eagle3_core.manifest import StageManifest
from tasks.common import publish_manifest, publish_table


def endpoint_limit_name(url: str) -> str:
    """The global concurrency limit of one serving endpoint: ``vllm:{host}:{port}``."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"vllm:{parts.hostname}:{port}"


def ensure_limits(names: list[str], slots: int) -> int:
    """Create missing limits with ``slots``; keep an operator's existing value. Returns the
    smallest limit, which becomes this run's in-flight bound per endpoint."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    smallest = slots
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                smallest = min(smallest, client.read_global_concurrency_limit_by_name(name).limit)
            except ObjectNotFound:
                try:
                    client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=slots))
                except ObjectAlreadyExists:  # another run created it a moment ago
                    pass
    return smallest


@task(name="generate-open", cache_policy=NO_CACHE)
def open_run(run: GenerateRun) -> StageManifest | None:
    """Skip check, endpoint probe, resume scan; the limit names for the batches."""
    return run.open()


@task(name="generate-batch", cache_policy=NO_CACHE, task_run_name="generate-batch-{batch.number}")
def generate_batch(run: GenerateRun, batch: Batch, limit_names: list[str], slots: int) -> int:
    # The lease is renewed while the batch runs; after a SIGKILL it lapses, and the slots come back.
    with concurrency(limit_names, occupy=slots, strict=True, lease_duration=run.cfg.limit_lease_seconds):
        run.run_batch(batch)
    return len(batch.rows)


@task(name="generate-finish", cache_policy=NO_CACHE)
def finish_run(run: GenerateRun) -> StageManifest:
    manifest = run.finish()
    publish_summary(manifest)
    return manifest


def publish_summary(manifest: StageManifest) -> None:
    """The summary artifacts: the manifest as markdown, and one table of every figure."""
    publish_manifest(manifest, title="generate")
    rows = [{"group": "count", "name": k, "value": v} for k, v in manifest.counts.items()]
    for group in ("reject_reasons", "reasoning_sources", "finish_reasons", "retries_by_reason", "latency_s"):
        rows += [{"group": group, "name": k, "value": v} for k, v in manifest.details.get(group, {}).items()]
    for url, timeline in manifest.details.get("concurrency_timeline", {}).items():
        rows += [{"group": f"concurrency {url}", "name": f"t={t}s", "value": n} for t, n in timeline[-50:]]
    publish_table(rows, key="generate-table", description="generate: counts, reasons, sources, latency, concurrency")
