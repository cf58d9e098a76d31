"""Where training's hidden states come from: one interface, three sources, one factory.

Every source is read the same way by the trainer (``reader(inputs)``: ``samples()``, then
``load(batch, budget, dtype, device, pack)`` returning the batch dict of ``data.py``), and set up
the same way by the stage (``check``, ``fingerprints``, ``check_memory``, ``prepare``, ``running``,
``finish``):

- ``HiddenShards`` (``train.mode: offline``): hidden/ shards written by extract, checksummed
  before the trainer starts;
- ``TargetInProcess`` (``online``): the frozen target run inside the trainer over sequences/;
- ``Spooled`` (``online-vllm``): an extraction engine's units through a bounded spool.

``source_for(mode)`` looks a settled mode up; which mode a run trains in (``auto`` included) is
decided once, in ``train.plan``. What differs by mode is a method here, never a branch elsewhere:
the trainer's reader, the stage's set-up, the config hash's facts, the card's hidden-state engine.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from eagle3_core.contracts.target import language_config
from eagle3_core.errors import ConfigError, InputError
from eagle3_core.stages.train.inputs import TrainInputs, check_hidden, check_sequences, check_vocab
from eagle3_core.target.config import TargetConfig, aux_layer_problem, default_aux_layer_ids


class HiddenSource:
    """The defaults: a source that starts nothing beside the trainer and reads sequences/."""

    mode = ""
    reads_hidden = False  # its input folder is hidden/ (else sequences/)
    layers_fix = "pass increasing, distinct --layers (or set target.aux_layer_ids): online training reads no hidden/"

    @staticmethod
    def check(hidden_dir, sequences_dir, hidden_size: int) -> tuple[int, int, list[int] | None]:
        """(samples, tokens, layers the input folder was made with, if it says) of the input folder."""
        if sequences_dir is None:
            raise InputError("online training needs sequences/", fix="pass --sequences DIR (the reconstruct output)")
        samples, tokens = check_sequences(sequences_dir)
        return samples, tokens, None

    @staticmethod
    def input_folder(inputs) -> tuple[str, str | None]:
        """(the fingerprint's name, the folder) the trained weights depend on."""
        return "sequences", inputs.sequences_dir

    @staticmethod
    def verify(inputs) -> None:
        """The full check of the input before the stage's folder is touched (nothing by default)."""

    @staticmethod
    def check_memory(cfg, inputs) -> None:
        """Before the trainer starts: whatever this source loads into the trainer fits (nothing here)."""

    @staticmethod
    def prepare(cfg, inputs, out: Path, reporter) -> None:
        """Before any step (the folder is locked and running)."""

    @staticmethod
    def running(cfg, target, inputs, out: Path, reporter):
        """A context manager around the trainer's process, yielding the live figures of what it starts."""
        return contextlib.nullcontext({})

    @staticmethod
    def finish(cfg, out: Path, manifest, summary: dict, figures: dict) -> None:
        """After the trainer succeeded, before the manifest is complete."""

    @staticmethod
    def train_devices(cfg) -> str | None:
        """CUDA devices the trainer is kept to (None = the launcher's default)."""
        return None

    @staticmethod
    def decides(cfg) -> dict:
        """Settings outside the hashed config that change the trained weights in this mode."""
        return {}

    @staticmethod
    def hidden_state_engine(cfg, inputs) -> str:
        """Where the target's hidden states come from, in words (provenance, the model card)."""
        return "transformers (inside the trainer)"


class HiddenShards(HiddenSource):
    mode, reads_hidden = "offline", True
    layers_fix = "extract hidden/ again with increasing, distinct --layers (or set target.aux_layer_ids)"

    @staticmethod
    def check(hidden_dir, sequences_dir, hidden_size: int) -> tuple[int, int, list[int] | None]:
        return check_hidden(hidden_dir, hidden_size)

    @staticmethod
    def verify(inputs) -> None:
        """Every hidden shard's blake2b against extract's manifest, before the trainer starts (and
        before the drafter folder is touched). Training reads each byte every epoch anyway, so one
        hashing pass (~1 GB/s a core) costs less than an epoch; a skipped run (complete) pays nothing."""
        from eagle3_core.contracts import hidden

        hidden.verify(inputs.hidden_dir, checksums=True)

    @staticmethod
    def input_folder(inputs) -> tuple[str, str | None]:
        return "hidden", inputs.hidden_dir

    @staticmethod
    def hidden_state_engine(cfg, inputs) -> str:
        from eagle3_core.contracts.details import ExtractDetails
        from eagle3_core.run.manifest import read_manifest

        manifest = read_manifest(inputs.hidden_dir)
        engine = ExtractDetails.of(manifest).engine if manifest is not None else "unknown"
        return f"{engine} (extract stage, hidden/)"

    @staticmethod
    def reader(inputs):
        from eagle3_core.stages.train.data import OfflineReader

        return OfflineReader(inputs.hidden_dir)


class TargetInProcess(HiddenSource):
    mode = "online"

    @staticmethod
    def check_memory(cfg, inputs) -> None:
        """The trainer's reader holds the whole target beside the drafter: sized from its config.json
        on the trainer's device before the trainer starts, so a target too large is one line naming
        online-vllm, not exit 137 inside the trainer."""
        import torch

        from eagle3_core.states.target_size import check_target_fits

        on_gpu = torch.cuda.is_available()
        check_target_fits(
            inputs.target_path,
            "cuda" if on_gpu else "cpu",
            cfg.state_dtype(on_gpu),
            what="online training's reader (train.mode: online)",
            fix="set train.mode: online-vllm (`eagle3 train --mode online-vllm`): an extraction engine (vLLM) "
            "computes the states beside the trainer; or train offline from extract's hidden/",
        )

    @staticmethod
    def reader(inputs):
        from eagle3_core.stages.train.data import OnlineReader

        return OnlineReader(inputs.sequences_dir, inputs.target_path, inputs.aux_layer_ids, inputs.trust_remote_code)


class Spooled(HiddenSource):
    mode = "online-vllm"

    @staticmethod
    def prepare(cfg, inputs, out: Path, reporter) -> None:
        from eagle3_core.stages.train import online_run

        online_run.prepare(cfg, inputs, out, reporter)

    @staticmethod
    def running(cfg, target, inputs, out: Path, reporter):
        from eagle3_core.stages.train import online_run

        return online_run.engine_for_run(cfg, target, inputs, out, reporter)

    @staticmethod
    def finish(cfg, out: Path, manifest, summary: dict, figures: dict) -> None:
        from eagle3_core.contracts.details import TrainDetails
        from eagle3_core.stages.train import online_run

        manifest.details |= TrainDetails(online=online_run.details(summary, figures, cfg)).dump()
        online_run.clean(cfg, out)

    @staticmethod
    def train_devices(cfg) -> str | None:
        return cfg.online_vllm.train_devices

    @staticmethod
    def decides(cfg) -> dict:
        """Only the engine's kind changes the states (not where or how fast it runs)."""
        return {"online_vllm_engine": cfg.online_vllm.engine}

    @staticmethod
    def hidden_state_engine(cfg, inputs) -> str:
        where = cfg.online_vllm.endpoint or "started by the train stage"
        return f"{cfg.online_vllm.engine} (online-vllm engine, {where})"

    @staticmethod
    def reader(inputs):
        from eagle3_core.stages.train.online_vllm import SpoolReader

        spool = inputs.spool
        return SpoolReader(inputs.sequences_dir, spool["dir"], spool["run_id"], spool["timeout_s"])


SOURCES: dict[str, type[HiddenSource]] = {s.mode: s for s in (HiddenShards, TargetInProcess, Spooled)}


def source_for(mode: str) -> type[HiddenSource]:
    """The source of ``train.mode`` (``auto`` must be settled first)."""
    if mode not in SOURCES:
        raise ConfigError(f"train.mode {mode!r} is not settled here", fix=f"use one of {sorted(SOURCES)}")
    return SOURCES[mode]


def check_inputs(mode: str, target: TargetConfig, hidden_dir, vocab_dir, sequences_dir=None) -> TrainInputs:
    """Validate everything the trainer will read; the first problem raises an ``InputError``."""
    target_path = str(Path(target.require_path()))
    config = language_config(target_path)
    vocab_file, draft_vocab = check_vocab(vocab_dir, int(config["vocab_size"]))
    source = source_for(mode)
    samples, tokens, made_with = source.check(hidden_dir, sequences_dir, int(config["hidden_size"]))
    layers = list(made_with or target.aux_layer_ids or default_aux_layer_ids(int(config["num_hidden_layers"])))
    problem = aux_layer_problem(layers, int(config["num_hidden_layers"]))
    if problem:
        raise InputError(
            f"auxiliary layers {problem}",
            path=hidden_dir if source.reads_hidden else None,
            fix=source.layers_fix,
        )
    return TrainInputs(
        target_path=target_path,
        target_config=config,
        vocab_file=vocab_file,
        draft_vocab_size=draft_vocab,
        aux_layer_ids=layers,
        mode=mode,
        hidden_dir=str(hidden_dir) if source.reads_hidden else None,
        sequences_dir=str(sequences_dir) if sequences_dir else None,
        trust_remote_code=target.trust_remote_code,
        samples=samples,
        tokens=tokens,
    )
