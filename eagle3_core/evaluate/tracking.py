"""The evaluation's figures into the training run's trackers (``drafter/tracking.json``).

Every number of the report goes, named by where it sits (``eval/online/with_drafter/
acceptance_length``, ``eval/offline/acceptance_per_position/0``, the context buckets by their
range: ``eval/by_context/buckets/512-2K/acceptance_length``), so a section the report gains is
logged with no change here. They land at the training run's
last step: W&B keeps them as the run's summary, TensorBoard and MLflow as that step's scalars.
No run named, nothing logged; a backend that fails is one warning line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eagle3_core.contracts.metrics import last_step
from eagle3_core.tracking import flatten, reopen

NOT_FIGURES = ("definitions", "drafter")


def evaluation_metrics(report: dict) -> dict[str, float]:
    figures = {k: v for k, v in report.items() if k not in NOT_FIGURES}
    if (figures.get("by_context") or {}).get("buckets"):  # named by range, not by position in the list
        block = figures["by_context"]
        figures["by_context"] = {**block, "buckets": {b["label"]: b for b in block["buckets"]}}
    return flatten("eval", figures)


def log_evaluation(drafter_dir: str | Path, report: dict, log: Callable[[str], None]) -> None:
    tracker = reopen(drafter_dir, report=lambda message: log(f"evaluate warning: {message}"))
    if not tracker.backends:
        return
    step = max(last_step(Path(drafter_dir) / "metrics.jsonl"), 0)
    tracker.log_summary(evaluation_metrics(report), step)
    names = [b.name for b in tracker.backends]  # those that took the figures
    tracker.close()
    if names:
        log(f"evaluate: figures logged to the training run ({', '.join(names)})")
