"""What a finished (or partly finished) run shows its user: where every output went and the
headline figures, read back from the stages' manifests and reports on disk.

Nothing here computes a figure: each is read from the file its stage wrote, and a figure whose
stage did not run is shown as ``-``, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eagle3_core.config import PipelineConfig
from eagle3_core.contracts.details import GenerateDetails, ReconstructDetails, TrainDetails
from eagle3_core.contracts.evaluation import ByContext, EvaluationReport
from eagle3_core.run.layout import RunLayout
from eagle3_core.run.manifest import StageManifest, read_manifest
from eagle3_core.stages.reconstruct.server_check import MATCH_FLOOR

Status = Literal["ran", "reused", "failed", "blocked", "not selected"]


@dataclass
class Outcome:
    """What happened to one stage (or the toy target, or the server) in one pipeline run."""

    stage: str
    status: Status
    out_dir: str
    seconds: float = 0.0
    started: float = 0.0
    reason: str = ""
    counts: dict[str, int] = field(default_factory=dict)


def headline(layout: RunLayout) -> dict[str, Any]:
    """The figures a user looks at first, None where the stage has not produced them."""
    gen, seq = read_manifest(layout.generations), read_manifest(layout.sequences)
    check = (ReconstructDetails.of(seq).server_check if seq is not None else None) or {}
    report_path = layout.eval / "report.json"
    report = EvaluationReport.read(report_path) if report_path.exists() else EvaluationReport()
    figures = {
        "samples accepted": gen.counts.get("accepted") if gen is not None else None,
        "samples rejected": gen.counts.get("rejected") if gen is not None else None,
        "reasoning present": _reasoning(gen),
        "token-exact reconstruction": _percent(check.get("match_rate"), check.get("warning")),
        "training loss": _training_loss(layout),
        "acceptance length (vLLM)": _vllm_acceptance(report),
        "acceptance length (offline)": report.offline.acceptance_length if report.offline else None,
    }
    by_context = _by_context(report.by_context)
    if by_context is not None:  # reports written before buckets existed keep their headline
        figures["acceptance by context"] = by_context
    if report.modes:  # a target with a thinking switch: both modes side by side
        figures["acceptance by thinking mode"] = (
            ", ".join(f"{mode} {_show(m.acceptance_length)}" for mode, m in report.modes.items())
            + f" (trained with thinking {report.thinking.trained_in})"
        )
    lossless = report.lossless.line if report.lossless else None
    if lossless is not None:
        figures["lossless"] = lossless
    engine = _engine(read_manifest(layout.drafter))
    if engine is not None:  # online training only; an offline run's headline stays as it was
        figures["hidden-state engine"] = engine
    return figures


def _vllm_acceptance(report: EvaluationReport) -> float | str | None:
    """vLLM's acceptance length, or its own words where it refused the drafter on this machine."""
    refused = report.vllm_refusal.message if report.vllm_refusal else None
    if refused is not None:
        return f"refused by vLLM on this machine: {refused} (the offline figure stands)"
    return report.with_drafter.acceptance_length if report.with_drafter else None


def _engine(drafter: StageManifest | None) -> str | None:
    """Where online-vllm training got its states: the standing engine's URL or folder, or the one it started."""
    online = TrainDetails.of(drafter).online if drafter is not None else None
    if not isinstance(online, dict):
        return None
    return (
        f"standing engine at {online['endpoint']}"
        if online.get("endpoint")
        else f"{online.get('engine')} engine started by the stage"
    )


def _by_context(block: ByContext | None) -> str | None:
    """The first and last context buckets of eval/report.json that hold a round: where long answers
    lose acceptance (the toy's 80-token answers hold one bucket only)."""
    held = block.ends() if block else []
    if not held:
        return None
    shown = ", ".join(f"{b.label} tokens {_show(b.acceptance_length)}" for b in held)
    return f"{shown} (k = {block.k}, {block.source} answers)"


def _percent(rate: float | None, warning: str | None = None) -> str | None:
    """A match rate as the share of samples whose rebuilt ids equal the server's; under 99%
    (reconstruct recorded a warning) with the likely cause, so the summary does not read as fine."""
    if rate is None:
        return None
    shown = f"{100 * rate:.1f}% of samples match the server's token ids"
    return shown + (f" (under {MATCH_FLOOR:.0%}: check the recipe's tokenizer and chat template)" if warning else "")


def _reasoning(gen: StageManifest | None) -> str | None:
    """How many accepted samples carry reasoning, and which response field it came from."""
    sources = GenerateDetails.of(gen).reasoning_sources if gen is not None else None
    if sources is None:
        return None
    present = {field: n for field, n in sources.items() if field != "none"}  # `none`: an answer without reasoning
    where = ", ".join(f"{n} in `{field}`" for field, n in present.items())
    return f"{sum(present.values())} of {gen.counts.get('accepted')} ({where or 'none'})"


def _training_loss(layout: RunLayout) -> float | None:
    """The last training-split loss in drafter/metrics.jsonl (the train stage's log of every step)."""
    metrics = layout.drafter / "metrics.jsonl"
    if not metrics.exists():
        return None
    import json

    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return next((r["loss"] for r in reversed(rows) if r.get("split", "train") == "train" and "loss" in r), None)


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def outputs(config: PipelineConfig) -> dict[str, Path]:
    """Each declared stage's folder, in DAG order (``eagle3_core.stages``)."""
    from eagle3_core.stages import STAGES

    return {spec.folder: spec.out(config) for spec in STAGES}


def summary_lines(config: PipelineConfig, outcomes: dict[str, Any]) -> list[str]:
    """Plain-text summary: stage outcomes, output folders, headline figures."""
    lines = ["stage         outcome        seconds  note"]
    for name, o in outcomes.items():
        o = o if isinstance(o, dict) else vars(o)
        lines.append(f"{name:<13} {o['status']:<14} {o['seconds']:>7.1f}  {o['reason'] or o['out_dir']}")
    lines += ["", "outputs:"]
    lines += [
        f"  {name:<20} {path}{'' if path.exists() else '  (not written)'}" for name, path in outputs(config).items()
    ]
    lines += ["", "headline:"]
    lines += [f"  {name:<27} {_show(value)}" for name, value in headline(config.layout).items()]
    return lines


def summary_markdown(config: PipelineConfig, outcomes: dict[str, Any]) -> str:
    rows = ["| stage | outcome | seconds | note |", "|---|---|---|---|"]
    for name, o in outcomes.items():
        o = o if isinstance(o, dict) else vars(o)
        rows.append(f"| {name} | {o['status']} | {o['seconds']:.1f} | {o['reason'] or o['out_dir']} |")
    figures = ["| figure | value |", "|---|---|"]
    figures += [f"| {k} | {_show(v)} |" for k, v in headline(config.layout).items()]
    return "\n".join([f"# eagle3 pipeline: `{config.out}`", "", *rows, "", *figures])
