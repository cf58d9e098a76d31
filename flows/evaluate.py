"""evaluate flow: drafter/export/ + target + held-out prompts -> eval/."""

from __future__ import annotations

from prefect import flow

from eagle3_core.evaluate.config import EvaluateConfig
from eagle3_core.manifest import StageManifest
from eagle3_core.serve.config import ServeConfig
from eagle3_core.target import TargetConfig
from tasks.evaluate import evaluate_task


@flow(name="evaluate", log_prints=True)
def evaluate_flow(
    cfg: EvaluateConfig,
    target: TargetConfig,
    export_dir: str,
    out_dir: str,
    serve: ServeConfig | None = None,
    generations_dir: str | None = None,
) -> StageManifest:
    """The drafter's acceptance length in real vLLM, offline, and as the training metrics predict."""
    return evaluate_task(
        cfg, target, str(export_dir), str(out_dir), serve, str(generations_dir) if generations_dir else None
    )
