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

import time
from pathlib import Path

from eagle3_core import errors
from eagle3_core.base import stable_hash
from eagle3_core.fingerprint import model_fingerprint
from eagle3_core.fsio import read_json, remove_tree, write_json_atomic
from eagle3_core.lifecycle import StageLifecycle
from eagle3_core.manifest import StageManifest, input_fingerprint
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.target import TargetConfig
from eagle3_core.tracking import RUN_FILE, check_backends
from eagle3_core.train.config import TrainConfig
from eagle3_core.train.ds_config import read_user_file
from eagle3_core.train.inputs import TrainInputs
from eagle3_core.train.launcher import launch
from eagle3_core.train.main import ERROR_FILE, SPEC_FILE, SUMMARY_FILE
from eagle3_core.train.provenance import run_facts
from eagle3_core.train.sources import check_inputs, resolve_auto, source_for

STAGE = "train"


def input_fingerprints(cfg: TrainConfig, inputs: TrainInputs, vocab_dir) -> dict[str, str]:
    found = {"vocab": input_fingerprint(vocab_dir), "target": model_fingerprint(inputs.target_path)}
    name, folder = source_for(inputs.mode).input_folder(inputs)
    found[name] = input_fingerprint(folder)
    if cfg.deepspeed_config:
        found["deepspeed_config"] = stable_hash(read_user_file(cfg.deepspeed_config))
    return found


def discard_stale(out: Path, existing: StageManifest | None, config_hash: str, inputs: dict, reporter) -> None:
    """Checkpoints of another config or other inputs must never be resumed."""
    if existing is None or (existing.config_hash == config_hash and existing.inputs == inputs):
        return
    reporter.log("train config or inputs changed since the last run: its checkpoints are discarded")
    for name in ("checkpoints", "export", "tensorboard"):
        remove_tree(out / name)  # for real, a symlink too, or one error: never resume what was said discarded
    for name in ("metrics.jsonl", SUMMARY_FILE, RUN_FILE):
        (out / name).unlink(missing_ok=True)


def trainer_error(out: Path, tail: list[str], returncode: int) -> errors.Eagle3Error:
    """The trainer's own error: the same Eagle3Error class and words, or its crash and last lines."""
    record = read_json(out / ERROR_FILE) if (out / ERROR_FILE).exists() else None
    if record and record["type"] != "crash":
        cls = getattr(errors, record["type"], errors.StageError)
        return cls(record["message"], fix=record.get("fix"), path=record.get("path"), sample_id=record.get("sample_id"))
    message = record["message"] if record else f"the trainer exited with code {returncode}"
    last = "\n    ".join(tail[-15:])
    return errors.StageError(
        f"training failed: {message}\n  last trainer output:\n    {last}",
        fix=f"see {out / 'train.log'}; rerun to resume from the last checkpoint",
    )


def complete_manifest(manifest: StageManifest, summary: dict, inputs: TrainInputs) -> StageManifest:
    evals = summary.get("evals", {})
    manifest.counts = {
        "steps": summary["steps"],
        "train_samples": summary["train_samples"],
        "heldout_samples": summary["heldout_samples"],
        "dataset_tokens": inputs.tokens,
    }
    manifest.details = {
        "heldout_initial": evals.get("initial"),
        "heldout_final": evals.get("final"),
        "sim_acceptance_length_initial": (evals.get("initial") or {}).get("sim_acceptance_length"),
        "sim_acceptance_length_final": (evals.get("final") or {}).get("sim_acceptance_length"),
        "aux_layer_ids": inputs.aux_layer_ids,
        "draft_vocab_size": inputs.draft_vocab_size,
        "mode": inputs.mode,
        "resumed_from": summary.get("resumed_from"),
        "device": summary.get("device"),
        "world_size": summary.get("world_size"),
        "deepspeed_config": summary.get("deepspeed_config"),
        "padding_share": summary.get("padding_share_this_process"),
        "export": "export/",
    }
    return manifest


def verify_source(inputs: TrainInputs, life: StageLifecycle) -> None:
    """The source's full input check (hidden/: every shard's blake2b), the lock released on failure."""
    try:
        source_for(inputs.mode).verify(inputs)
    except BaseException:
        life.release()
        raise


def run_train(
    cfg: TrainConfig,
    target: TargetConfig,
    hidden_dir,
    vocab_dir,
    out_dir,
    sequences_dir=None,
    reporter: Reporter | None = None,
) -> StageManifest:
    """Train (or resume, or reuse) the drafter; see the module docstring."""
    reporter, out, started = reporter or NullReporter(), Path(out_dir), time.monotonic()
    mode, line = resolve_auto(cfg.mode, hidden_dir)
    if line:
        cfg = cfg.model_copy(update={"mode": mode})
        reporter.log(line)
    source = source_for(cfg.mode)
    check_backends(cfg.report_to)  # a tracker whose package is missing: one error before any work
    inputs = check_inputs(cfg.mode, target, hidden_dir, vocab_dir, sequences_dir)
    fingerprints = input_fingerprints(cfg, inputs, vocab_dir)
    config_hash = stable_hash({"train": cfg.output_hash(), "layers": inputs.aux_layer_ids})
    life = StageLifecycle(
        STAGE,
        out,
        config_hash,
        fingerprints,
        shards=("export/*.json", "export/*.safetensors"),  # not the card: evaluate rewrites it
        versions=("torch", "deepspeed", "transformers"),
        reporter=reporter,
    )
    existing = life.open()
    if existing is not None:
        return existing
    verify_source(inputs, life)
    with life.guard():
        discard_stale(out, life.previous, config_hash, fingerprints, reporter)
        manifest = life.begin()
        (out / ERROR_FILE).unlink(missing_ok=True)
        reporter.log(
            f"train: {inputs.samples} samples, {inputs.tokens} tokens, draft vocab {inputs.draft_vocab_size}, "
            f"aux layers {inputs.aux_layer_ids}, mode {inputs.mode}"
        )
        source.prepare(cfg, inputs, out, reporter)
        write_json_atomic(
            out / SPEC_FILE,
            {
                "cfg": cfg.model_dump(mode="json"),
                "inputs": vars(inputs),
                "out_dir": str(out),
                "facts": run_facts(cfg, inputs, out, config_hash),
            },
        )
        # an engine (online-vllm) lives as long as the trainer
        with source.running(cfg, target, inputs, out, reporter) as engine_figures:
            outcome = launch(cfg, out / SPEC_FILE, reporter)
        if outcome.returncode != 0:
            raise trainer_error(out, outcome.tail, outcome.returncode)
        summary = read_json(out / SUMMARY_FILE)
        manifest = complete_manifest(manifest, summary, inputs)
        source.finish(cfg, out, manifest, summary, engine_figures)
        manifest.timings = {"train": round(time.monotonic() - started, 2)}
    return life.complete(manifest)
