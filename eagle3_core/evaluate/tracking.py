"""The evaluation's figures into the training run's trackers (``drafter/tracking.json``), so they
read at a glance: a handful of scalars, one chart, one table.

- Scalars at the training run's last step: ``vllm_eval/acceptance_length`` (vLLM, with the
  drafter), ``vllm_eval/acceptance_per_position/<i>`` (vLLM's; the offline loop's,
  ``offline_acceptance_per_position``, when vLLM did not run), ``vllm_eval/speedup``,
  ``vllm_eval/offline_acceptance_length``: 3 + k at most (6 at the default k = 3).
- The curve ``vllm_eval/by_context``: acceptance length per context bucket, a line per swept k
  (``vllm_eval/by_context/k<k>``), x = the bucket's index in the report (0 = ``0-512``, ...), one
  point per bucket that holds a round: 5 lines at the default sweep.
- The table ``vllm_eval/report``: every figure of ``eval/report.json`` (its definitions and the
  drafter's paths left out, buckets named by range), one row each.

Each backend renders the three as it says (``eagle3_core/tracking/backends.py``). The prefix
``vllm_eval`` sorts after the training run's ``heldout`` and ``train``: TensorBoard, W&B and
MLflow group charts by the name's first component and list the groups by name, so the
evaluation's group comes after training's instead of above it. No run named, nothing logged;
a backend that fails is one warning line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eagle3_core.contracts.metrics import last_step
from eagle3_core.tracking import reopen
from eagle3_core.tracking.figures import Curve, Figures, Table

PREFIX = "vllm_eval"
NOT_FIGURES = ("definitions", "drafter")
NOT_ROWS = ("argv",)  # the server's command: the card and report.json carry it


def evaluation_figures(report: dict) -> Figures:
    online = (report.get("online") or {}).get("with_drafter") or {}
    offline = report.get("offline") or {}
    scalars = {
        f"{PREFIX}/acceptance_length": online.get("acceptance_length"),
        f"{PREFIX}/speedup": (report.get("online") or {}).get("speedup"),
        f"{PREFIX}/offline_acceptance_length": offline.get("acceptance_length"),
    }
    per_position, source = (online, "") if online else (offline, "offline_")
    for i, value in enumerate(per_position.get("acceptance_per_position") or []):
        scalars[f"{PREFIX}/{source}acceptance_per_position/{i}"] = value
    figures = Figures(scalars={k: float(v) for k, v in scalars.items() if _number(v)})
    curve = by_context_curve(report.get("by_context"))
    if curve is not None:
        figures.curves[f"{PREFIX}/by_context"] = curve
    figures.tables[f"{PREFIX}/report"] = report_table(report, curve)
    return figures


def by_context_curve(block: dict | None) -> Curve | None:
    buckets = (block or {}).get("buckets") or []
    if not buckets:
        return None
    lines: dict[str, list[tuple[int, float]]] = {}
    for k in sorted(buckets[0]["acceptance_length_by_k"], key=int):
        points = [(i, b["acceptance_length_by_k"][k]) for i, b in enumerate(buckets)]
        lines[f"k{k}"] = [(i, float(v)) for i, v in points if _number(v)]
    return Curve("bucket", "acceptance_length", [b["label"] for b in buckets], lines)


def report_table(report: dict, curve: Curve | None) -> Table:
    figures = {k: v for k, v in report.items() if k not in NOT_FIGURES}
    if (figures.get("by_context") or {}).get("buckets"):  # named by range, not by position in the list
        block = figures["by_context"]
        figures["by_context"] = {**block, "buckets": {b["label"]: b for b in block["buckets"]}}
    note = "Every figure of eval/report.json (definitions: its `definitions`)."
    if curve is not None:
        ticks = ", ".join(f"{i} = {t}" for i, t in enumerate(curve.ticks))
        note += f" The chart {PREFIX}/by_context has one line per k; its x is the context bucket: {ticks}."
    return Table(["figure", "value"], [[name, value] for name, value in _leaves("", figures)], note)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _leaves(prefix: str, value: Any):
    """(path, text) of every number, string and bool under ``value``; None left out."""
    if value is None:
        return
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, inner in items:
            if key not in NOT_ROWS:
                yield from _leaves(f"{prefix}/{key}" if prefix else str(key), inner)
        return
    yield prefix, f"{value:.6g}" if isinstance(value, float) else str(value)


def log_evaluation(drafter_dir: str | Path, report: dict, log: Callable[[str], None]) -> None:
    tracker = reopen(drafter_dir, report=lambda message: log(f"evaluate warning: {message}"))
    if not tracker.backends:
        return
    step = max(last_step(Path(drafter_dir) / "metrics.jsonl"), 0)
    tracker.log_figures(evaluation_figures(report), step)
    names = [b.name for b in tracker.backends]  # those that took the figures
    tracker.close()
    if names:
        log(f"evaluate: figures logged to the training run ({', '.join(names)})")
