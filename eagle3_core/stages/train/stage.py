"""`run_train`: hidden/ (or sequences/ + target) + vocab/ -> drafter/ (checkpoints, metrics, export).

On-disk layout (``out_dir`` is the drafter folder):

    drafter/manifest.json        running -> complete (counts, held-out acceptance before/after)
    drafter/run_spec.json        what the trainer process runs (config + validated inputs)
    drafter/checkpoints/         DeepSpeed checkpoints (``latest`` names the newest)
    drafter/metrics.jsonl        one line per logged step, plus held-out lines
    drafter/train.log            the trainer's whole output
    drafter/export/              config.json + model.safetensors for vLLM / SGLang, README.md (the model card)
    drafter/tensorboard/         TensorBoard event files (train.report_to; wandb/, mlflow.db beside when named)
    drafter/tracking.json        the tracking run's ids and stores, for evaluate

Guarantees: inputs are checked before the trainer starts (wrong width, foreign vocab, empty set
are ``InputError``s, no step runs); a complete manifest for the same config and inputs returns
at once; a run stopped half-way resumes from its last checkpoint; checkpoints made for another
config or other inputs are discarded rather than resumed; a failed trainer raises its own error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eagle3_core import errors
from eagle3_core.base import stable_hash
from eagle3_core.contracts.details import TrainDetails
from eagle3_core.run.driver import Stage, drive
from eagle3_core.run.fsio import read_json, write_json_atomic
from eagle3_core.run.manifest import StageManifest, input_fingerprint
from eagle3_core.run.progress import Reporter
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.ds_config import read_user_file
from eagle3_core.stages.train.hidden_sources import check_inputs, source_for
from eagle3_core.stages.train.inputs import TrainInputs
from eagle3_core.stages.train.kind_hooks import training_for
from eagle3_core.stages.train.launcher import launch
from eagle3_core.stages.train.main import ERROR_FILE, ERROR_PREFIX, SPEC_FILE, SUMMARY_FILE
from eagle3_core.stages.train.plan import decide
from eagle3_core.stages.train.provenance import run_facts
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.fingerprint import model_fingerprint
from eagle3_core.tracking import RUN_FILE, check_backends

STAGE = "train"


def input_fingerprints(cfg: TrainConfig, inputs: TrainInputs, vocab_dir) -> dict[str, str]:
    found = {"vocab": input_fingerprint(vocab_dir), "target": model_fingerprint(inputs.target_path)}
    name, folder = source_for(inputs.mode).input_folder(inputs)
    found[name] = input_fingerprint(folder)
    if cfg.deepspeed_config:
        found["deepspeed_config"] = stable_hash(read_user_file(cfg.deepspeed_config))
    return found


def trainer_error(out: Path, tail: list[str], returncode: int) -> errors.Eagle3Error:
    """The trainer's own error: the same Eagle3Error class and words, or its crash and last lines."""
    record = read_json(out / ERROR_FILE) if (out / ERROR_FILE).exists() else error_line_record(tail)
    if record and record["type"] != "crash":
        cls = getattr(errors, record["type"], errors.StageError)
        return cls(record["message"], fix=record.get("fix"), path=record.get("path"), sample_id=record.get("sample_id"))
    message = record["message"] if record else f"the trainer exited with code {returncode}"
    last = "\n    ".join(tail[-15:])
    return errors.StageError(
        f"training failed: {message}\n  last trainer output:\n    {last}",
        fix=f"see {out / 'train.log'}; rerun to resume from the last checkpoint",
    )


def error_line_record(tail: list[str]) -> dict | None:
    """The trainer's error record from its stdout line, where ``error.json`` could not be written."""
    for line in reversed(tail):
        _, prefix, record = line.partition(ERROR_PREFIX)
        if prefix:
            return json.loads(record)
    return None


def complete_manifest(manifest: StageManifest, summary: dict, inputs: TrainInputs) -> StageManifest:
    evals = summary.get("evals", {})
    manifest.counts = {
        "steps": summary["steps"],
        "train_samples": summary["train_samples"],
        "heldout_samples": summary["heldout_samples"],
        "dataset_tokens": inputs.tokens,
    }
    manifest.details = TrainDetails(
        heldout_initial=evals.get("initial"),
        heldout_final=evals.get("final"),
        sim_acceptance_length_initial=(evals.get("initial") or {}).get("sim_acceptance_length"),
        sim_acceptance_length_final=(evals.get("final") or {}).get("sim_acceptance_length"),
        aux_layer_ids=inputs.aux_layer_ids,
        draft_vocab_size=inputs.draft_vocab_size,
        mode=inputs.mode,
        resumed_from=summary.get("resumed_from"),
        device=summary.get("device"),
        world_size=summary.get("world_size"),
        deepspeed_config=summary.get("deepspeed_config"),
        padding_share=summary.get("padding_share_this_process"),
        export="export/",
    ).dump()
    return manifest


@dataclass
class TrainStage(Stage):
    """Train (or resume, or reuse) the drafter; see the module docstring."""

    name, versions = STAGE, ("torch", "deepspeed", "transformers")
    shards = ("export/*.json", "export/*.safetensors")  # not the card: evaluate rewrites it
    # never resume another config's checkpoints
    outputs = ("checkpoints", "export", "tensorboard", "metrics.jsonl", SUMMARY_FILE, RUN_FILE)
    changed = "its checkpoints are discarded"

    cfg: TrainConfig
    target: TargetConfig
    hidden_dir: str | None
    vocab_dir: str
    out_dir: str
    sequences_dir: str | None = None
    reporter: Reporter | None = None

    def keys(self) -> tuple[str, dict[str, str]]:
        plan = decide(self.cfg.mode, self.hidden_dir)
        if plan.chosen:
            self.reporter.log(f"train: train.mode auto: {plan.why}")
        self.cfg, self.source = plan.config(self.cfg), plan.source
        check_backends(self.cfg.report_to)  # a tracker whose package is missing: one error before any work
        self.inputs = check_inputs(self.cfg.mode, self.target, self.hidden_dir, self.vocab_dir, self.sequences_dir)
        training_for(self.cfg.kind).check(self.cfg, self.inputs)  # the kind's needs of the target
        fingerprints = input_fingerprints(self.cfg, self.inputs, self.vocab_dir)
        self.config_hash = self.key(
            train=self.cfg, source=self.source.decides(self.cfg), layers=self.inputs.aux_layer_ids
        )
        return self.config_hash, fingerprints

    def plan(self) -> list[None]:
        """The source's full input check (hidden/: every shard's blake2b) and, for a source that loads the
        target into the trainer, its size against the device (``online``), before this folder is written."""
        self.source.verify(self.inputs)
        self.source.check_memory(self.cfg, self.inputs)
        (self.out_dir / ERROR_FILE).unlink(missing_ok=True)
        return [None]

    def run(self, unit: None) -> None:
        cfg, inputs, out = self.cfg, self.inputs, self.out_dir
        self.reporter.log(
            f"train: {inputs.samples} samples, {inputs.tokens} tokens, draft vocab {inputs.draft_vocab_size}, "
            f"aux layers {inputs.aux_layer_ids}, mode {inputs.mode}"
        )
        if warning := warmup_warning(cfg):
            self.reporter.log(warning)
        self.source.prepare(cfg, inputs, out, self.reporter)
        facts = run_facts(cfg, inputs, out, self.config_hash)
        spec = {"cfg": cfg.model_dump(mode="json"), "inputs": vars(inputs), "out_dir": str(out), "facts": facts}
        write_json_atomic(out / SPEC_FILE, spec)
        # an engine (online-vllm) lives as long as the trainer
        with self.source.running(cfg, self.target, inputs, out, self.reporter) as engine_figures:
            ended = launch(cfg, out / SPEC_FILE, self.reporter)
        if ended.returncode != 0:
            raise trainer_error(out, ended.tail, ended.returncode)
        self.engine_figures = engine_figures

    def finish(self, manifest: StageManifest) -> None:
        summary = read_json(self.out_dir / SUMMARY_FILE)
        complete_manifest(manifest, summary, self.inputs)
        self.source.finish(self.cfg, self.out_dir, manifest, summary, self.engine_figures)


def warmup_warning(cfg: TrainConfig) -> str | None:
    """One line when the warm-up is as long as the run: the scheduler then caps it at the run's last
    step, so the whole run trains below ``lr`` (4 steps under a 50-step warm-up left a Qwen3
    target's loss unchanged for 3 steps)."""
    if cfg.max_steps is None or cfg.warmup_steps < cfg.max_steps:
        return None
    return (
        f"train: warning: train.warmup_steps ({cfg.warmup_steps}) is not shorter than train.max_steps "
        f"({cfg.max_steps}): the learning rate climbs for the whole run and never reaches train.lr; "
        "set warmup_steps to a fraction of max_steps"
    )


def run_train(*args, **kwargs) -> StageManifest:
    """The stage whole in this process (tests, benchmarks): ``drive(TrainStage(...))``."""
    return drive(TrainStage(*args, **kwargs))
