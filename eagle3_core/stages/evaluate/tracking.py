"""The evaluation's figures into the training run's trackers (``drafter/tracking.json``), so they
read at a glance: a handful of scalars, one chart, one table.

- Scalars at the training run's last step: ``vllm_eval/acceptance_length`` (vLLM, with the
  drafter), ``vllm_eval/acceptance_per_position/<i>`` (vLLM's; the offline loop's,
  ``offline_acceptance_per_position``, when vLLM did not run), ``vllm_eval/speedup``,
  ``vllm_eval/offline_acceptance_length``: 3 + k at most (6 at the default k = 3).
- The curve ``vllm_eval/by_context``: acceptance length per context bucket, a line per swept k
  (``vllm_eval/by_context/k<k>``), x = the bucket's index in the report (0 = ``0-512``, ...), one
  point per bucket that holds a round: 5 lines at the default sweep.
- The charts ``vllm_eval/by_output_position`` and ``vllm_eval/by_phase``: vLLM's own per-request steps, a
  line per thinking mode (``thinking_on``, ``thinking_off``) where modes were measured, else one (``vllm``).
- Scalars per thinking mode (``vllm_eval/thinking_<mode>/acceptance_length``) and the share of greedy outputs
  identical with and without the drafter (``vllm_eval/identical_outputs_share``).
- The table ``vllm_eval/report``: the headline figures, about 30 rows (report.json holds every figure),
  the held-out file by its name, never a path of this machine.

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

from eagle3_core.contracts.evaluation import (
    ByContext,
    EvaluationReport,
    Online,
    PerRequest,
    Spread,
    StepRow,
    Thinking,
    WithDrafter,
)
from eagle3_core.contracts.metrics import last_step
from eagle3_core.tracking import reopen
from eagle3_core.tracking.figures import Curve, Figures, Table

PREFIX = "vllm_eval"


def evaluation_figures(report: EvaluationReport) -> Figures:
    online, offline = report.with_drafter, report.offline
    scalars = {
        f"{PREFIX}/acceptance_length": online.acceptance_length if online else None,
        f"{PREFIX}/speedup": report.online.speedup if report.online else None,
        f"{PREFIX}/offline_acceptance_length": offline.acceptance_length if offline else None,
    }
    per_position, source = (online, "") if online is not None else (offline, "offline_")
    for i, value in enumerate((per_position.acceptance_per_position if per_position else None) or []):
        scalars[f"{PREFIX}/{source}acceptance_per_position/{i}"] = value
    greedy = report.lossless.greedy if report.lossless else None
    scalars[f"{PREFIX}/identical_outputs_share"] = greedy.identical_share if greedy else None
    for mode, m in report.modes.items():
        scalars[f"{PREFIX}/thinking_{mode}/acceptance_length"] = m.acceptance_length
    figures = Figures(scalars={k: float(v) for k, v in scalars.items() if _number(v)})
    curve = by_context_curve(report.by_context)
    if curve is not None:
        figures.curves[f"{PREFIX}/by_context"] = curve
    for name, step_curve in step_curves(report).items():
        figures.curves[f"{PREFIX}/{name}"] = step_curve
    figures.tables[f"{PREFIX}/report"] = report_table(report, curve)
    return figures


def step_curves(report: EvaluationReport) -> dict[str, Curve]:
    """vLLM's own per-request steps by output position and by phase: a line per thinking mode where modes were
    measured, else one for the headline pass; x is the bucket's (phase's) index, named in the curve's ticks."""
    runs = {f"thinking_{mode}": m.per_request for mode, m in report.modes.items()}  # the headline pass is one
    runs = runs or {"vllm": report.per_request}
    runs = {name: block for name, block in runs.items() if block}
    curves = {}
    starts = {r.label: r.from_ for block in runs.values() for r in block.by_position or []}
    labels = sorted(starts, key=starts.get)  # the buckets any run holds, in output order
    positions = {name: {r.label: r for r in block.by_position or []} for name, block in runs.items()}
    if labels:
        curves["by_output_position"] = _step_curve("output_position", labels, positions)
    phases = {name: block.by_phase or {} for name, block in runs.items()}
    phase_labels = [p for p in ("reasoning", "answer", "tool_call") if any(p in b for b in phases.values())]
    if phase_labels:
        curves["by_phase"] = _step_curve("phase", phase_labels, phases)
    return curves


def _step_curve(x: str, labels: list[str], rows: dict[str, dict[str, StepRow]]) -> Curve:
    lines = {
        name: [(i, float(row[label].acceptance_length)) for i, label in enumerate(labels) if _held(row.get(label))]
        for name, row in rows.items()
    }
    return Curve(x, "acceptance_length", labels, {name: points for name, points in lines.items() if points})


def _held(row: StepRow | None) -> bool:
    return row is not None and bool(row.drafts) and _number(row.acceptance_length)


def by_context_curve(block: ByContext | None) -> Curve | None:
    buckets = block.buckets if block else []
    if not buckets:
        return None
    lines: dict[str, list[tuple[int, float]]] = {}
    for k in sorted(buckets[0].acceptance_length_by_k or {}, key=int):
        points = [(i, (b.acceptance_length_by_k or {}).get(k)) for i, b in enumerate(buckets)]
        lines[f"k{k}"] = [(i, float(v)) for i, v in points if _number(v)]
    return Curve("bucket", "acceptance_length", [b.label for b in buckets], lines)


def report_table(report: EvaluationReport, curve: Curve | None) -> Table:
    """The headline figures, a row each (about 30, not report.json's every leaf): what a reader looks for in the
    Text tab, no path of this machine (the held-out file by its name)."""
    settings, heldout, online = report.settings, report.heldout, report.online or Online()
    vllm, steps = report.with_drafter or WithDrafter(), report.per_request or PerRequest()
    held_out = f"{heldout.prompts} from {Path(str(heldout.source)).name}" if heldout.source or heldout.prompts else None
    rows = [
        ("k", settings.num_speculative_tokens),
        ("temperature", settings.temperature),
        ("held-out prompts", held_out),
        ("vLLM acceptance length", vllm.acceptance_length),
        ("vLLM acceptance per position", vllm.acceptance_per_position),
        ("vLLM verify steps", vllm.drafts),
        ("per-request spread p10 / p50 / p90", _spread(steps.spread)),
        *((f"by output position {r.label}", r.acceptance_length) for r in steps.by_position or []),
        *((f"by phase {name}", r.acceptance_length) for name, r in (steps.by_phase or {}).items()),
        ("speed-up", online.speedup if not online.speedup_error else online.speedup_error),
        ("lossless", online.lossless.line if online.lossless else None),
        ("offline acceptance length", report.offline.acceptance_length if report.offline else None),
        ("online - offline", report.agreement.difference if report.agreement else None),
        *_context_rows(report.by_context),
        ("simulated acceptance length", report.simulated.acceptance_length if report.simulated else None),
        *_thinking_rows(report.thinking),
        *((f"left out: {name}", why) for name, why in report.left_out.items()),
    ]
    note = "The headline of eval/report.json (every figure and its definition are there)."
    if curve is not None:
        ticks = ", ".join(f"{i} = {t}" for i, t in enumerate(curve.ticks))
        note += f" The chart {PREFIX}/by_context has one line per k; its x is the context bucket: {ticks}."
    return Table(["figure", "value"], [[name, _text(value)] for name, value in rows if value is not None], note)


def _context_rows(block: ByContext | None) -> list[tuple[str, Any]]:
    """Acceptance at the evaluated k per context bucket that holds a round."""
    held = block.held() if block else []
    return [(f"by context {b.label} (k = {block.k})", b.acceptance_length) for b in held]


def _thinking_rows(block: Thinking | None) -> list[tuple[str, Any]]:
    if not block:
        return []
    rows = [("trained with thinking", block.trained_in)]
    return rows + [(f"thinking {mode}: acceptance length", m.acceptance_length) for mode, m in block.modes.items()]


def _spread(spread: Spread | None) -> str | None:
    return " / ".join(_text(q) for q in (spread.p10, spread.p50, spread.p90)) if spread else None


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def log_evaluation(drafter_dir: str | Path, report: EvaluationReport, log: Callable[[str], None]) -> None:
    tracker = reopen(drafter_dir, report=lambda message: log(f"evaluate warning: {message}"))
    if not tracker.backends:
        return
    step = max(last_step(Path(drafter_dir) / "metrics.jsonl"), 0)
    tracker.log_figures(evaluation_figures(report), step)
    names = [b.name for b in tracker.backends]  # those that took the figures
    tracker.close()
    if names:
        log(f"evaluate: figures logged to the training run ({', '.join(names)})")
