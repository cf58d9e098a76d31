"""The Prefect parts of the generate stage: the pre-flight, its table.

Its flow is built from its declaration like every stage's (``tasks/stage.py``): ``generate-plan``
(the probe, the pre-flight, the resume scan), one ``generate-stream`` task for the whole input,
``generate-release``, ``generate-finish``; ``prepare(stage)`` and ``publish(stage, manifest)`` here
are its hooks. Never one task per request: Prefect's per-task overhead (tens of milliseconds and
several API calls) would cap a per-request design far below a server's 128 requests/s. Nor one
task per batch: a batch waits for its slowest row while the endpoint idles (issue 13 measured 0.41x of a
bare loop). ``generate-stream`` runs the core's engine over every row; Prefect shows it through
the progress artifact and one log line per shard written. Its endpoints' shared limits are given
to it as to any stage that states endpoints (``tasks/endpoints.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasks.common import publish_table

if TYPE_CHECKING:
    from eagle3_core.generate.stage import GenerateStage
    from eagle3_core.manifest import StageManifest


def prepare(stage: GenerateStage) -> None:
    """Before the driver opens the folder: the pre-flight suite from the stage's target."""
    from eagle3_core.reconstruct.preflight import generate_preflight

    stage.preflight = generate_preflight(stage.target)


def publish(stage: GenerateStage, manifest: StageManifest) -> None:
    """Beside the manifest's summary: one table of every figure."""
    rows = [{"group": "count", "name": k, "value": v} for k, v in manifest.counts.items()]
    for group in (
        "reject_reasons",
        "open_reasons",
        "reasoning_sources",
        "finish_reasons",
        "retries_by_reason",
        "latency_s",
    ):
        rows += [{"group": group, "name": k, "value": v} for k, v in manifest.details.get(group, {}).items()]
    for url, timeline in manifest.details.get("concurrency_timeline", {}).items():
        rows += [{"group": f"concurrency {url}", "name": f"t={t}s", "value": n} for t, n in timeline[-50:]]
    publish_table(rows, key="generate-table", description="generate: counts, reasons, sources, latency, concurrency")
