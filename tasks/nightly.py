"""Tasks of the nightly flow: ask the endpoints' model, start today's version, prune old ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from prefect import get_run_logger, task

from eagle3_core.nightly import versions as dv
from eagle3_core.stages.generate.config import GenerateConfig


@task(name="ask-served-model", retries=2, retry_delay_seconds=[10, 60])
def ask_served_model(cfg: GenerateConfig) -> GenerateConfig:
    """The generate config pinned to the model the endpoints serve (the probe's verdict)."""
    from eagle3_core.endpoint.probe import probe_endpoints

    report = probe_endpoints(cfg, cfg.base_urls)
    get_run_logger().info(report.line())
    return cfg.model_copy(update={"model": report.model})


@task(name="start-version")
def start_version(root: str, cfg: GenerateConfig) -> tuple[Path, dv.Reuse]:
    """Create (or resume) today's version, seeded with the previous version's current shards."""
    root_dir = Path(root)
    name = dv.new_version_name(root_dir, dt.date.today())
    version_dir = dv.versions_dir(root_dir) / name
    previous = [v for v in dv.complete_versions(root_dir) if v != name]
    reuse = dv.Reuse()
    if previous:
        reuse = dv.seed_from(
            dv.versions_dir(root_dir) / previous[-1] / "generations",
            version_dir / "generations",
            dv.current_sample_ids(cfg),
        )
    get_run_logger().info(
        "version %s: %d shards reused as is, %d filtered, %d dropped (%d rows carried over)",
        name,
        reuse.linked,
        reuse.filtered,
        reuse.dropped,
        reuse.rows,
    )
    return version_dir, reuse


@task(name="prune-versions")
def prune_versions(root: str, keep: int) -> list[str]:
    deleted = dv.prune(root, keep)
    if deleted:
        get_run_logger().info("deleted old versions: %s", ", ".join(deleted))
    return deleted
