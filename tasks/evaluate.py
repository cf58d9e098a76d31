"""Prefect task of the evaluate stage: a call into the core, then the report as artifacts.

No Prefect result cache here: the drafter export carries no manifest of its own, so a path-based
cache key could not see a retrained drafter at the same path; ``run_evaluate`` skips itself
from its manifest (which fingerprints the export's files), at the cost of reading a few headers.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from eagle3_core.evaluate.config import EvaluateConfig
from eagle3_core.evaluate.stage import run_evaluate
from eagle3_core.manifest import StageManifest
from eagle3_core.serve.config import ServeConfig
from eagle3_core.target import TargetConfig
from tasks.common import PrefectReporter, artifact_key, publish_image, publish_manifest


@task(name="evaluate")
def evaluate_task(
    cfg: EvaluateConfig,
    target: TargetConfig,
    export_dir: str,
    out_dir: str,
    serve: ServeConfig | None = None,
    generations_dir: str | None = None,
) -> StageManifest:
    """Measure the drafter in vLLM and offline; publish report.md and the plots."""
    manifest = run_evaluate(
        cfg, target, export_dir, out_dir, serve, generations_dir, reporter=PrefectReporter("evaluate")
    )
    publish_report(Path(out_dir))
    publish_manifest(manifest, title="evaluate")
    return manifest


def publish_report(out_dir: Path) -> None:
    """report.md as the keyed markdown artifact ``evaluate-report``, each plot as an image artifact."""
    from prefect.artifacts import create_markdown_artifact

    report = out_dir / "report.md"
    if report.exists():
        create_markdown_artifact(
            report.read_text(encoding="utf-8"),
            key=artifact_key("evaluate", "report"),
            description="drafter evaluation: acceptance length online and offline",
        )
    for image in sorted(out_dir.glob("*.png")):
        publish_image(image, key=f"evaluate-{image.stem}", description=image.stem.replace("_", " "))
