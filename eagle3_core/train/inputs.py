"""Check the train stage's inputs before any step runs, and collect the facts the trainer needs.

Cheap by design (no torch): safetensors headers are read as JSON, Parquet through its footer.
Every refusal is an ``InputError`` naming the file, what was expected and the fix:

- hidden states whose width is not the target's ``hidden_size``, or not 3 auxiliary layers;
- a vocab file from another tokenizer (``t2d``/``counts`` length != the target's ``vocab_size``,
  or a ``d2t`` that maps outside it);
- an empty dataset (no index rows, no shards, no sequences, or no supervised token).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_core.errors import InputError
from eagle3_core.manifest import read_manifest
from eagle3_core.target import TargetConfig, aux_layer_problem, default_aux_layer_ids

VOCAB_FILE = "vocab.safetensors"
INDEX_FILE = "index.parquet"


@dataclass
class TrainInputs:
    """What the trainer reads, validated."""

    target_path: str
    target_config: dict
    vocab_file: str
    draft_vocab_size: int
    aux_layer_ids: list[int]
    mode: str
    hidden_dir: str | None = None
    sequences_dir: str | None = None
    samples: int = 0
    tokens: int = 0
    notes: list[str] = field(default_factory=list)
    spool: dict | None = None  # online-vllm: {"dir", "run_id", "timeout_s"}, set by the stage

    @property
    def hidden_size(self) -> int:
        return int(self.target_config["hidden_size"])

    @property
    def vocab_size(self) -> int:
        return int(self.target_config["vocab_size"])


def safetensors_header(path: str | Path) -> dict:
    """name -> {dtype, shape, data_offsets} from a safetensors file's JSON header."""
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    header.pop("__metadata__", None)
    return header


def load_target_config(target: TargetConfig) -> tuple[str, dict]:
    path = Path(target.require_path())
    config_file = path / "config.json"
    if not config_file.exists():
        raise InputError(
            f"the target has no config.json: {path}",
            path=str(config_file),
            fix="point --target at a Hugging Face model directory",
        )
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config = config.get("text_config") or config  # multimodal wrappers keep the LM inside
    return str(path), config


def check_vocab(vocab_dir: str | Path, vocab_size: int) -> tuple[str, int]:
    """(vocab file, draft vocab size); refuses a vocab built for another tokenizer."""
    file = Path(vocab_dir) / VOCAB_FILE
    if not file.exists():
        raise InputError(
            f"no draft vocabulary at {file}",
            path=str(file),
            fix="run `eagle3 vocab` first and pass its folder as --vocab",
        )
    header = safetensors_header(file)
    missing = {"d2t", "t2d"} - set(header)
    if missing:
        raise InputError(f"vocab file lacks {sorted(missing)}", path=str(file), fix="rebuild it with `eagle3 vocab`")
    for name in ("t2d", "counts"):
        if name in header and header[name]["shape"] != [vocab_size]:
            raise InputError(
                f"vocab file from another tokenizer: {name} covers {header[name]['shape'][0]} target ids, "
                f"the target's vocab_size is {vocab_size}",
                path=str(file),
                fix="rebuild vocab/ with this target's tokenizer (`eagle3 vocab`)",
            )
    import numpy as np
    from safetensors.numpy import load_file

    d2t = load_file(str(file))["d2t"]
    targets = np.arange(len(d2t)) + d2t
    if len(d2t) and (targets.min() < 0 or targets.max() >= vocab_size):
        raise InputError(
            f"vocab file from another tokenizer: d2t maps draft ids to target ids up to "
            f"{int(targets.max())}, the target's vocab_size is {vocab_size}",
            path=str(file),
            fix="rebuild vocab/ with this target's tokenizer (`eagle3 vocab`)",
        )
    return str(file), len(d2t)


def check_hidden(hidden_dir: str | Path, hidden_size: int) -> tuple[int, int, list[int] | None]:
    """(samples, tokens, layers from the manifest); refuses a damaged shard or a width other than the target's."""
    from eagle3_core.readers import hidden

    hidden_dir = Path(hidden_dir)
    if not (hidden_dir / INDEX_FILE).exists():
        raise InputError(
            f"empty dataset: no {INDEX_FILE} in {hidden_dir}",
            path=str(hidden_dir),
            fix="run `eagle3 extract` first and pass its folder as --input",
        )
    table = hidden.read_index(hidden_dir, ["length"])
    tokens = int(sum(table.column("length").to_pylist()))
    if table.num_rows == 0 or tokens == 0:
        raise InputError(
            f"empty dataset: {hidden_dir / INDEX_FILE} lists no tokens",
            path=str(hidden_dir / INDEX_FILE),
            fix="extract hidden states from a non-empty sequences/ folder",
        )
    first = hidden_dir / hidden.verify(hidden_dir)[0]  # every shard whole (sizes), before any step
    shape = safetensors_header(first)["aux_hidden_states"]["shape"]
    if len(shape) != 3 or shape[1] != 3 or shape[2] != hidden_size:
        raise InputError(
            f"hidden states do not match the target: aux_hidden_states is {shape}, expected [T, 3, {hidden_size}] "
            f"(the target's hidden_size)",
            path=str(first),
            fix="extract hidden/ with the same target you pass to --target",
        )
    manifest = read_manifest(hidden_dir)
    layers = manifest.details.get("layers") if manifest is not None else None
    return table.num_rows, tokens, layers


def check_sequences(sequences_dir: str | Path) -> tuple[int, int]:
    """(samples, tokens) of sequences/ for online mode; refuses an empty or damaged one."""
    from eagle3_core.readers import sequences

    files = sequences.parts(sequences_dir)
    rows = sum(sequences.num_rows(f) for f in files)
    if rows == 0:
        raise InputError(
            f"empty dataset: no rows in {sequences_dir}/part-*.parquet",
            path=str(sequences_dir),
            fix="run `eagle3 reconstruct` first and pass its folder as --sequences",
        )
    tokens = sum(int(sum(sequences.read(f, ["num_tokens"]).column(0).to_pylist())) for f in files)
    return rows, tokens


def check_inputs(mode: str, target: TargetConfig, hidden_dir, vocab_dir, sequences_dir=None) -> TrainInputs:
    """Validate everything the trainer will read; the first problem raises an ``InputError``."""
    target_path, config = load_target_config(target)
    vocab_file, draft_vocab = check_vocab(vocab_dir, int(config["vocab_size"]))
    layers = target.aux_layer_ids
    if mode == "offline":
        samples, tokens, manifest_layers = check_hidden(hidden_dir, int(config["hidden_size"]))
        layers = manifest_layers or layers
    else:
        if sequences_dir is None:
            raise InputError("online training needs sequences/", fix="pass --sequences DIR (the reconstruct output)")
        samples, tokens = check_sequences(sequences_dir)
    layers = list(layers or default_aux_layer_ids(int(config["num_hidden_layers"])))
    problem = aux_layer_problem(layers, int(config["num_hidden_layers"]))
    if problem:
        raise InputError(
            f"auxiliary layers {problem}",
            path=hidden_dir if mode == "offline" else None,
            fix="extract hidden/ again with increasing, distinct --layers (or set target.aux_layer_ids)"
            if mode == "offline"
            else "pass increasing, distinct --layers (or set target.aux_layer_ids): online training reads no hidden/",
        )
    return TrainInputs(
        target_path=target_path,
        target_config=config,
        vocab_file=vocab_file,
        draft_vocab_size=draft_vocab,
        aux_layer_ids=layers,
        mode=mode,
        hidden_dir=str(hidden_dir) if mode == "offline" else None,
        sequences_dir=str(sequences_dir) if sequences_dir else None,
        samples=samples,
        tokens=tokens,
    )
