"""The evaluation's outputs: ``report.json``, ``report.md`` and two plots, written atomically.

``report.json`` carries every figure with its definition, so a number never travels without
saying whether the bonus token is counted, at which k, temperature and batch it was measured,
and how far the online (vLLM) and offline (transformers) greedy figures are apart. It is written through its
typed model (``contracts/evaluation.py`` ``EvaluationReport``), the JSON the stage's dict makes, key for key;
report.md and the plots are drawn from the model, as the card and the trackers read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_core.contracts.evaluation import (
    Agreement,
    ByContext,
    EvaluationReport,
    Lossless,
    Offline,
    Online,
    PerRequest,
    Simulated,
    SpecFigures,
    Spread,
    StepRow,
    Thinking,
)
from eagle3_core.run.fsio import atomic_path, write_json_atomic

DEFINITIONS = {
    "acceptance_length": "1 + accepted / drafts: tokens emitted per target forward pass, the bonus "
    "token (the target's own token after each verification) INCLUDED; vLLM's definition",
    "acceptance_rate": "accepted / draft_tokens: share of drafted tokens the target kept, bonus token EXCLUDED",
    "acceptance_per_position": "for draft position i (0-based): drafts whose i-th token was kept / drafts; "
    "a token is kept only if every earlier one was, so the list never increases",
    "simulated_acceptance_length": "1 + sum over i<k of prod_{j<=i} acc_j, from the training metrics' per-step "
    "accuracies (teacher-forced; held-out split when logged); bonus token INCLUDED",
    "output_tokens_per_s": "completion tokens of all prompts / wall seconds of the whole batch (informative on CPU)",
    "agreement": "online minus offline acceptance length at the same k, greedy; relative = that / offline; "
    "per_request_difference: vLLM's per-request figure minus offline",
    "by_context": "acceptance length per bucket of context length (tokens before the round's first draft, prompt "
    "included), greedy speculative decoding replayed offline on the target's own answers to the held-out prompts "
    "(source vllm or offline), or, where that replay did not run, vLLM's own per-request steps at the evaluated k "
    "(source vllm-per-request); its total is set beside vLLM's counters for the same answers",
    "per_request": "online.with_drafter.per_request: vLLM's own verify steps of each answer of the timed pass "
    "(--per-request-spec-decode-metrics detailed), each step placed at its first draft's output position (the "
    "prefill writes token 0, step s starts at 1 + sum of the earlier steps' kept drafts + 1): acceptance length "
    "overall (equal to /metrics' for the same requests: agreement_with_metrics), by output position, by phase "
    "(reasoning before the think-close token, answer, tool call from the recipe's tool_call_start on), by context "
    "(prompt + position), per draft position (steps that kept i+1 drafts / steps that drafted i+1), and the spread "
    "of the answers' own acceptance lengths (p10, p50, p90); null where no answer carried the steps (left_out)",
    "lossless": "online.lossless: whether drafting changed the outputs. Greedy: each prompt's output ids with the "
    "drafter against without it (the baseline server), the share identical and where any pair first parts (a near-tie "
    "can fall the other way in the last ulp, since a verify step batches k + 1 positions); sampled: the two arms' "
    "output lengths (mean, p50, p90) and a two-sample Kolmogorov-Smirnov test. output_hash: SHA-256 of each arm's "
    "output ids in prompt order",
    "thinking": "the same drafter, prompts and servers with the target's thinking switch set on and off "
    "(evaluate.thinking); each mode's figures as online's, trained_in: the mode generate recorded",
    "left_out": "passes this evaluation did not run or finish here, each with its reason (the target too large for "
    "the device, no way to render the prompts as the server does, a failure); the figures shown stand without them",
}

PER_POSITION_PNG = "acceptance_per_position.png"
LENGTH_VS_K_PNG = "acceptance_length_vs_k.png"
BY_CONTEXT_PNG = "acceptance_by_context.png"
STEP_PNGS = {"by_output_position": "acceptance_by_output_position.png", "by_phase": "acceptance_by_phase.png"}


def agreement(online: dict | None, offline: dict | None) -> dict | None:
    """How far apart the two greedy acceptance lengths at the evaluated k are."""
    if not online or not offline:
        return None
    on, off = online["with_drafter"]["acceptance_length"], offline["acceptance_length"]
    if on is None or off is None:
        return None
    per_request = (online["with_drafter"].get("per_request") or {}).get("acceptance_length")
    return {
        "online_acceptance_length": on,
        "offline_acceptance_length": off,
        "difference": on - off,
        "relative_difference": (on - off) / off,
        "per_request_acceptance_length": per_request,
        "per_request_difference": per_request - off if per_request is not None else None,
    }


def report_object(report: dict[str, Any]) -> dict[str, Any]:
    """report.json's object from the stage's figures: the definitions and, greedy, the online/offline agreement."""
    report = {**report, "definitions": DEFINITIONS}
    # The offline loop is greedy: it is comparable with vLLM only when vLLM was greedy too.
    greedy = report["settings"]["temperature"] == 0
    report["agreement"] = agreement(report.get("online"), report.get("offline")) if greedy else None
    return report


def write_report(out_dir: str | Path, report: dict[str, Any]) -> EvaluationReport:
    """Write report.json (through ``EvaluationReport``: a key it does not declare fails here), report.md and the
    plots; returns the report the readers (card, trackers, manifest) take."""
    out_dir = Path(out_dir)
    typed = EvaluationReport.built(report_object(report))
    written = typed.dump()
    write_json_atomic(out_dir / "report.json", written)
    with atomic_path(out_dir / "report.md") as tmp:
        tmp.write_text(render_markdown(typed), encoding="utf-8")
    plot_report(out_dir, typed)
    return typed


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render_markdown(report: EvaluationReport) -> str:
    """A human summary: settings, the headline figures with their definitions, agreement."""
    s = report.settings
    lines = [
        "# eagle3 evaluation",
        "",
        f"k = {s.num_speculative_tokens}, temperature = {s.temperature}, batch (concurrent requests) = "
        f"{s.concurrency}, max tokens = {s.max_tokens}, held-out prompts = {report.heldout.prompts}",
        "",
        *_refusal_lines(report),
        *_left_out_lines(report.left_out),
        # short headers: Prefect's artifact page clipped the last column of a table this wide at 1600 px
        "Acceptance length counts the bonus token (1 + accepted / drafts); acceptance rate does not.",
        "",
        "| measured by | prompts | acceptance length | acceptance rate | per position | drafts |",
        "|---|---|---|---|---|---|",
    ]
    for name, prompts, m in _measurements(report):
        per_pos = ", ".join(_fmt(v, 2) for v in m.acceptance_per_position or [])
        lines.append(
            f"| {name} | {prompts} | {_fmt(m.acceptance_length)} | {_fmt(m.acceptance_rate)} | {per_pos} | {m.drafts} |"
        )
    lines += _simulated_lines(report.simulated)
    lines += _speed_lines(report.online) + _lossless_lines(report.lossless)
    lines += _agreement_lines(report.agreement)
    lines += _per_request_lines(report.per_request)
    lines += _thinking_lines(report.thinking)
    lines += _context_lines(report.by_context) + _sweep_lines(report.offline)
    lines += ["", "## Definitions", ""] + [f"- **{k}**: {v}" for k, v in report.definitions.items()]
    return "\n".join(lines) + "\n"


def _measurements(report: EvaluationReport) -> list[tuple[str, int, SpecFigures]]:
    """(name, prompts, figures) of each acceptance measurement the report holds: online, offline."""
    s, rows = report.settings, []
    if report.with_drafter is not None:
        rows.append((f"vLLM, batch {s.concurrency}, {s.dtype_online}", report.heldout.prompts, report.with_drafter))
    if report.offline is not None:
        rows.append((f"offline loop, batch 1, {s.dtype_offline}", report.offline.prompts, report.offline))
    return rows


def _paragraph(text: str) -> list[str]:
    return ["", text]


def _refusal_lines(report: EvaluationReport) -> list[str]:
    """vLLM's refusal of the drafter's method on this machine, in its words, and what stands instead."""
    refusal = report.vllm_refusal
    if refusal is None:
        return []
    offline = report.offline.prompts if report.offline else None
    return [
        f"vLLM {refusal.vllm_version or '(version not logged)'} refused this drafter's method "
        f"({refusal.method}) on this machine ({refusal.device}): `{refusal.message}`. The acceptance "
        f"figures are the offline loop's, at the same k on {offline} of the same held-out prompts.",
        "",
    ]


def _left_out_lines(left: dict[str, str]) -> list[str]:
    """The passes left out here and why (``evaluate/offline_passes.py``)."""
    names = {
        "offline": "The offline loop",
        "by_context": "The by-context replay",
        "per_request": "The per-request figure (vLLM's own verify steps)",
        "by_phase": "The per-request figure by phase",
    }
    return [f"- {names.get(name, name)} was left out: {why}." for name, why in left.items()] + ([""] if left else [])


def _simulated_lines(sim: Simulated | None) -> list[str]:
    if sim is None:
        return []
    return _paragraph(
        f"Simulated acceptance length from the training metrics ({sim.split} split, step "
        f"{sim.training_step}): {_fmt(sim.acceptance_length)}"
    )


def _sweep_lines(offline: Offline | None) -> list[str]:
    sweep = (offline.k_sweep if offline else None) or []
    if not sweep:
        return []
    return ["", "| k | offline acceptance length |", "|---|---|"] + [
        f"| {p.k} | {_fmt(p.acceptance_length)} |" for p in sweep
    ]


def _speed_lines(online: Online | None) -> list[str]:
    if online is None or online.without_drafter is None:
        return []
    w, wo = online.with_drafter, online.without_drafter
    spread = online.speedup_spread or [None, None]
    speed = (
        f"measurement error: {online.speedup_error}"
        if online.speedup_error
        else f"speed-up {_fmt(online.speedup, 2)}x, {_fmt(spread[0], 2)}-{_fmt(spread[1], 2)}x over "
        f"{len(w.output_tokens_per_s_repeats or [])} repeats after a warm-up"
    )
    return _paragraph(
        f"Output tokens/s (median): {_fmt(w.output_tokens_per_s, 1)} with the drafter, "
        f"{_fmt(wo.output_tokens_per_s, 1)} without ({speed})."
    )


def _lossless_lines(lossless: Lossless | None) -> list[str]:
    if lossless is None or not lossless.line:
        return []
    hashes = lossless.output_hash or {}
    shown = ", ".join(f"{arm.replace('_', ' ')} `{h[:16]}`" for arm, h in hashes.items() if h)
    return _paragraph(f"{lossless.line} Output hashes (SHA-256 of the ids in prompt order): {shown}.")


def _thinking_lines(block: Thinking | None) -> list[str]:
    """Thinking on and off side by side: the same drafter, prompts and servers."""
    if block is None:
        return []
    lines = [
        "",
        f"## Thinking on and off (`{block.switch}`; the drafter was trained with thinking {block.trained_in})",
        "",
        "| thinking | acceptance length | per position | reasoning | answer | output tokens | speed-up | identical outputs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in block.modes.items():
        phases = (m.per_request.by_phase if m.per_request else None) or {}
        greedy = m.lossless.greedy if m.lossless else None
        identical = f"{greedy.identical} of {greedy.compared}" if greedy and greedy.compared else "n/a"
        reasoning, answer = (phases[p].acceptance_length if p in phases else None for p in ("reasoning", "answer"))
        lines.append(
            f"| {name} | {_fmt(m.acceptance_length)} | {', '.join(_fmt(v, 2) for v in m.acceptance_per_position or [])} "
            f"| {_fmt(reasoning)} | {_fmt(answer)} | {m.output_tokens} | {_fmt(m.speedup, 2)} | {identical} |"
        )
    return lines


def _agreement_lines(agree: Agreement | None) -> list[str]:
    if agree is None:
        return []
    return _paragraph(
        f"Online vs offline (greedy, same k): {_fmt(agree.online_acceptance_length)} vs "
        f"{_fmt(agree.offline_acceptance_length)}, difference {_fmt(agree.difference)} "
        f"({_fmt(100 * agree.relative_difference, 1)} %)."
    )


def _per_request_lines(block: PerRequest | None) -> list[str]:
    """vLLM's own per-request figures: the total beside /metrics, the spread, by output position and by phase."""
    if block is None:
        return []
    spread, agree = block.spread or Spread(), block.agreement_with_metrics
    lines = [
        "",
        f"## vLLM's per-request acceptance ({block.requests} answers, {block.drafts} verify steps)",
        "",
        f"Acceptance length {_fmt(block.acceptance_length)} ({_fmt(agree.metrics_acceptance_length)} in "
        f"/metrics for the same pass, difference {_fmt(agree.difference, 6)}); over prompts p10 "
        f"{_fmt(spread.p10)}, p50 {_fmt(spread.p50)}, p90 {_fmt(spread.p90)}.",
    ]
    lines += _step_table("output position (tokens)", [(r.label, r) for r in block.by_position or []])
    return lines + _step_table("phase", list((block.by_phase or {}).items()))


def _step_table(name: str, rows: list[tuple[str, StepRow]]) -> list[str]:
    if not rows:
        return []
    head = ["", f"| {name} | verify steps | acceptance length |", "|---|---|---|"]
    return head + [f"| {label} | {r.drafts} | {_fmt(r.acceptance_length)} |" for label, r in rows]


def _context_lines(block: ByContext | None) -> list[str]:
    """One row per context bucket: rounds, acceptance length at the evaluated k and at each swept k."""
    if block is None or not block.buckets:
        return []
    ks = sorted(block.buckets[0].acceptance_length_by_k or {}, key=int)
    steps = block.source == "vllm-per-request"  # vLLM's own verify steps where the replay did not run
    measured = "vLLM's own verify steps" if steps else f"replayed on {block.source}'s answers"
    lines = [
        "",
        f"## Acceptance by context length (k = {block.k}, {measured}, {block.answers} answers)",
        "",
        "| context (tokens) | rounds | acceptance length | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|---|---|---|" + "---|" * len(ks),
    ]
    for b in block.buckets:
        by_k = " | ".join(_fmt(b.acceptance_length_by_k[k]) for k in ks)
        lines.append(f"| {b.label} | {b.drafts} | {_fmt(b.acceptance_length)} | {by_k} |")
    lines += [
        "",
        f"Total {_fmt(block.total.acceptance_length)} {'in the steps' if steps else 'replayed'}, "
        f"{_fmt(block.vllm_acceptance_length)} "
        f"in vLLM's counters (difference {_fmt(block.difference_from_vllm)}).",
    ]
    return lines


def plot_report(out_dir: Path, report: EvaluationReport) -> list[Path]:
    """The PNG plots (matplotlib, headless): each one the report has the figures for."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    series = [
        (name, m.acceptance_per_position or [])
        for name, m in (("vLLM", report.with_drafter), ("offline", report.offline))
        if m is not None
    ]
    if series:
        paths.append(_plot_per_position(out_dir, series, plt))
    if report.offline is not None and report.offline.k_sweep:
        paths.append(_plot_length_vs_k(out_dir, report, plt))
    if report.by_context is not None and report.by_context.buckets:
        paths.append(_plot_by_context(out_dir, report.by_context, plt))
    from eagle3_core.stages.evaluate.tracking import step_curves  # the trackers' charts of the same steps

    for name, curve in step_curves(report).items():
        paths.append(_plot_steps(out_dir / STEP_PNGS[name], curve, plt))
    return paths


def _plot_steps(path: Path, curve, plt) -> Path:
    """vLLM's own per-request steps: acceptance length per output-position bucket (or phase), a line per thinking
    mode where both were measured."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, points in curve.lines.items():
        ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name.replace("_", " "))
    ax.set_xticks(range(len(curve.ticks)), curve.ticks)
    what = curve.x_label.replace("_", " ")
    ax.set(xlabel=what, ylabel="acceptance length (bonus incl.)", title=f"Acceptance by {what} (vLLM's own steps)")
    ax.legend()
    return _save(fig, path)


def _plot_per_position(out_dir: Path, series: list[tuple[str, list]], plt) -> Path:
    """Acceptance per draft position, a bar group per position, a bar per measurement."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series):
        xs = [p + i * width for p in range(len(values))]
        ax.bar(xs, [v or 0.0 for v in values], width=width, label=name)
    k = max(len(values) for _, values in series)
    ax.set_xticks([p + width * (len(series) - 1) / 2 for p in range(k)], [str(p) for p in range(k)])
    ax.set(
        xlabel="draft position (0 = first drafted token)",
        ylabel="accepted / drafts",
        ylim=(0, 1),
        title="Acceptance per position",
    )
    ax.legend()
    return _save(fig, out_dir / PER_POSITION_PNG)


def _plot_length_vs_k(out_dir: Path, report: EvaluationReport, plt) -> Path:
    """The offline k sweep's acceptance length, with vLLM's one k beside it."""
    sweep, k = report.offline.k_sweep, report.settings.num_speculative_tokens
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([p.k for p in sweep], [p.acceptance_length or 1.0 for p in sweep], marker="o", label="offline")
    online = report.with_drafter
    if online is not None and online.acceptance_length is not None:
        ax.plot([k], [online.acceptance_length], "s", label="vLLM")
    ax.set_xticks(sorted({p.k for p in sweep} | {k}))
    ax.set(xlabel="k (draft tokens per step)", ylabel="acceptance length (bonus incl.)", title="Acceptance length vs k")
    ax.legend()
    return _save(fig, out_dir / LENGTH_VS_K_PNG)


def _plot_by_context(out_dir: Path, block: ByContext, plt) -> Path:
    """Acceptance length against context position (one point per bucket), one line per k."""
    buckets = block.buckets
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for k in sorted(buckets[0].acceptance_length_by_k or {}, key=int):
        values = [(b.acceptance_length_by_k or {}).get(k) for b in buckets]
        xs = [i for i, v in enumerate(values) if v is not None]
        ax.plot(xs, [values[i] for i in xs], marker="o", label=f"k={k}")
    ax.set_xticks(range(len(buckets)), [b.label for b in buckets])
    ax.set(
        xlabel="context position (tokens, prompt included)",
        ylabel="acceptance length (bonus incl.)",
        title="Acceptance by context length",
    )
    ax.legend()
    return _save(fig, out_dir / BY_CONTEXT_PNG)


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
