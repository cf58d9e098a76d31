"""The evaluate stage's own artifacts: report.md (``evaluate-report``) and each plot.

No Prefect result cache (``tasks/stage.py``): the drafter export carries no manifest of its own,
so a path-based cache key could not see a retrained drafter at the same path; the stage skips
itself from its manifest (which fingerprints the export's files).
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.run.manifest import StageManifest
from tasks.common import artifact_key, publish_image


def publish(stage, manifest: StageManifest) -> None:
    publish_report(stage.out_dir)


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
