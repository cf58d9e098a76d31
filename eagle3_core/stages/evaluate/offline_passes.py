"""Evaluate's passes that load the target (the offline loop, the by-context replay), and what is left
out and why: a later pass never costs a figure already measured.

vLLM's measurement loads nothing into this process; these two passes load the whole target
(``offline.ChainDecoder``). So:

- Before anything loads (before vLLM starts too), ``plan_offline`` sizes the target from its config.json
  against the device they would use (``states.target_size``; ``offline.placement``: a GPU in bf16, else
  the CPU in fp32). Where it cannot fit they are left out with one plan line and vLLM still measures;
  with vLLM off (offline only) it is one ``ConfigError`` naming ``evaluate.offline: false``.
- Their prompts are rendered as the server renders them (``offline.offline_prompt_ids``: the local
  template, else vLLM's own prompt ids from the online pass).
- ``run_pass`` runs one: a pass that cannot run here (``offline.LeftOut``: too large, or no way to render
  the prompts as the server does) or that fails once a figure is measured is recorded in the report's
  ``left_out`` (``{pass: reason}``) with one log line, and the stage completes with what it measured. A
  failure with nothing measured yet stays the error it is.
- ``check_measured``: where passes were left out and nothing measured the drafter at all (vLLM refused
  its method, the offline loop was left out), one ``StageError`` with the reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eagle3_core.errors import ConfigError, StageError
from eagle3_core.run.progress import Reporter
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.offline import OFFLINE_TOO_LARGE, LeftOut, placement
from eagle3_core.target.config import TargetConfig

PASSES = {"offline": "the offline loop", "by_context": "the by-context replay"}


def plan_offline(cfg: EvaluateConfig, target: TargetConfig, reporter: Reporter) -> str | None:
    """None when the target fits where the offline passes run; else why not, said once now (before any
    load), or a ``ConfigError`` when the offline loop is all this evaluation would measure."""
    from eagle3_core.states.target_size import target_size

    device, dtype = placement()
    size = target_size(target.path, device, dtype)
    if size.fits:
        return None
    if not cfg.online and cfg.offline:  # the offline loop is all this evaluation would measure
        raise ConfigError(f"evaluate's offline loop cannot load the target here: {size.words()}", fix=OFFLINE_TOO_LARGE)
    planned = [PASSES[name] for name in PASSES if getattr(cfg, name)]
    if planned:
        reporter.log(
            f"evaluate: {' and '.join(planned)} left out, before any load: {size.words()}; vLLM measures the drafter"
        )
    return size.words()


@dataclass
class OfflinePasses:
    """The two passes of one evaluation; ``served`` (vLLM's prompt ids per prompt) once vLLM ran."""

    cfg: EvaluateConfig
    target: TargetConfig
    export_dir: Path
    prompts: list
    reporter: Reporter
    too_large: str | None  # plan_offline's reason, said in the plan line
    served: list | None = None
    loop_ids: list | None = None  # the offline loop's prompts' ids, in the order of its answers
    loaded: object | None = None  # the ChainDecoder both passes share: the target is loaded once

    def decoder(self):
        """The target and drafter, loaded by the first pass that needs them (an 8B target in fp32 is 32 GB)."""
        from eagle3_core.stages.evaluate.offline import ChainDecoder

        if self.loaded is None:
            trusted = self.target.trust_remote_code
            self.loaded = ChainDecoder.load(self.target.path, self.export_dir, self.cfg.threads, trusted)
        return self.loaded

    def loop(self) -> tuple[dict, list]:
        """The chain loop at k and over ``k_sweep``: the report's ``offline`` block and its answers."""
        from eagle3_core.stages.evaluate.offline import offline_prompt_ids, run_offline

        cfg, n = self.cfg, self.cfg.offline_max_prompts
        if self.too_large:
            raise LeftOut(self.too_large, said=cfg.offline)  # the plan line named it when it was planned
        chosen = offline_prompt_ids(self.target, self.prompts[:n], None if self.served is None else self.served[:n])
        self.loop_ids = [ids for ids in chosen if ids]  # a prompt whose vLLM request failed has none
        decoder = self.decoder()
        k, results = cfg.num_speculative_tokens, {}
        for kk in sorted(set(cfg.k_sweep) | {k}):
            results[kk] = run_offline(decoder, self.loop_ids, kk, cfg.max_tokens, self.reporter)
            self.reporter.log(f"evaluate: offline k={kk}: acceptance length {results[kk].counters.acceptance_length}")
        main = results[k]
        return {
            **main.counters.summary(k),
            "prompts": len(self.loop_ids),
            "wall_s": main.wall_s,
            "output_tokens": sum(len(c) for c in main.completions),
            "k_sweep": [{"k": kk, **results[kk].counters.summary(kk)} for kk in sorted(set(cfg.k_sweep))],
        }, main.completions

    def by_context(self, answers: dict, online: dict | None) -> dict:
        """Acceptance per context bucket, replayed on vLLM's answers (else the offline loop's)."""
        from eagle3_core.contracts.evaluation import ByContext
        from eagle3_core.stages.evaluate.buckets import context_report
        from eagle3_core.stages.evaluate.offline import offline_prompt_ids

        if self.too_large:
            raise LeftOut(self.too_large, said=self.cfg.by_context)
        source = "vllm" if "vllm" in answers else "offline"
        ids = offline_prompt_ids(self.target, self.prompts, self.served) if source == "vllm" else self.loop_ids
        block = context_report(self.cfg, self.decoder(), ids, answers[source], online, source)
        typed = ByContext.model_validate(block)
        shown = typed.ends() or typed.buckets
        buckets = [shown[0]] if shown[0] is shown[-1] else [shown[0], shown[-1]]  # one bucket is named once
        self.reporter.log(
            f"evaluate: acceptance by context (k={self.cfg.num_speculative_tokens}, {source} answers): "
            + ", ".join(f"{b.label} {b.acceptance_length}" for b in buckets)
            + f"; total {typed.total.acceptance_length} (vLLM {typed.vllm_acceptance_length})"
        )
        return block


def run_pass(name: str, measure: Callable[[], object], report: dict, reporter: Reporter):
    """``measure()``, or None with the reason in ``report["left_out"][name]`` (module docstring)."""
    try:
        return measure()
    except LeftOut as out:
        reason, said = str(out), out.said
    except Exception as exc:
        if report.get("online") is None and report.get("offline") is None:
            raise  # nothing measured yet that this failure could cost: it stays the error it is
        words = str(exc).strip().splitlines()
        reason, said = f"it failed ({type(exc).__name__}{': ' + words[0] if words else ''})", False
    report["left_out"][name] = reason
    if not said:
        reporter.log(f"evaluate: {PASSES[name]} left out: {reason}")
    return None


def check_measured(report: dict) -> None:
    """One ``StageError`` where passes were left out and no figure of the drafter's acceptance stands."""
    if report.get("online") is not None or report.get("offline") is not None or not report["left_out"]:
        return
    refused = report.get("vllm_refusal")
    reasons = [f"vLLM refused the drafter's method here ({refused['message']})"] if refused else []
    reasons += [f"{PASSES[name]} was left out: {why}" for name, why in report["left_out"].items()]
    raise StageError(
        "nothing measured the drafter: " + "; ".join(reasons),
        fix="measure it in vLLM (evaluate.online: true) on a machine whose vLLM runs the drafter's method: "
        "the offline passes need the target to fit here and the prompts as the server renders them",
    )
