"""The Prefect parts of the generate stage: its table.

Its flow is built from its declaration like every stage's (``tasks/stage.py``): ``generate-plan``
(the probe, the pre-flight, the resume scan), one ``generate-stream`` task for the whole input,
``generate-release``, ``generate-finish``; ``publish(stage, manifest)`` here is its one hook (the
pre-flight is the stage's own, built from its target). Never one task per request: Prefect's per-task overhead (tens of milliseconds and
several API calls) would cap a per-request design far below a server's 128 requests/s. Nor one
task per batch: a batch waits for its slowest row while the endpoint idles (issue 13 measured 0.41x of a
bare loop). ``generate-stream`` runs the core's engine over every row; Prefect shows it through
the progress artifact and one log line per shard written. Its endpoints' shared limits are given
to it as to any stage that states endpoints (``tasks/endpoints.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eagle3_core.contracts.details import GenerateDetails
from tasks.common import publish_table

if TYPE_CHECKING:
    from eagle3_core.run.manifest import StageManifest
    from eagle3_core.stages.generate.stage import GenerateStage


def publish(stage: GenerateStage, manifest: StageManifest) -> None:
    """Beside the manifest's summary: one table of every figure."""
    rows = [{"group": "count", "name": k, "value": v} for k, v in manifest.counts.items()]
    details = GenerateDetails.of(manifest)
    groups = {
        "reject_reasons": details.reject_reasons,
        "open_reasons": details.open_reasons,
        "reasoning_sources": details.reasoning_sources,
        "finish_reasons": details.finish_reasons,
        "retries_by_reason": details.retries_by_reason,
        "latency_s": details.latency_s,
    }
    for group, figures in groups.items():
        rows += [{"group": group, "name": k, "value": v} for k, v in (figures or {}).items()]
    for url, timeline in details.concurrency_timeline.items():
        rows += [{"group": f"concurrency {url}", "name": f"t={t}s", "value": n} for t, n in timeline[-50:]]
    publish_table(rows, key="generate-table", description="generate: counts, reasons, sources, latency, concurrency")
