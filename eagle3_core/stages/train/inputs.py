"""Check the train stage's inputs before any step runs, and collect the facts the trainer needs.

Cheap by design (no torch): safetensors headers are read as JSON (``contracts``), Parquet through its footer.
Every refusal is an ``InputError`` naming the file, what was expected and the fix:

- hidden states whose width is not the target's ``hidden_size``, or not 3 auxiliary layers;
- a vocab file from another tokenizer (``t2d``/``counts`` length != the target's ``vocab_size``,
  or a ``d2t`` that maps outside it);
- an empty dataset (no index rows, no shards, no sequences, or no supervised token).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eagle3_core.contracts.details import ExtractDetails
from eagle3_core.contracts.folder import required
from eagle3_core.contracts.header import tensors as safetensors_header
from eagle3_core.errors import InputError
from eagle3_core.run.manifest import read_manifest

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
    trust_remote_code: bool = False  # target.trust_remote_code: the online reader loads the target with it
    spool: dict | None = None  # online-vllm: {"dir", "run_id", "timeout_s"}, set by the stage

    @property
    def hidden_size(self) -> int:
        return int(self.target_config["hidden_size"])

    @property
    def vocab_size(self) -> int:
        return int(self.target_config["vocab_size"])


def check_vocab(vocab_dir: str | Path, vocab_size: int) -> tuple[str, int]:
    """(vocab file, draft vocab size); refuses a vocab built for another tokenizer."""
    file = required(
        Path(vocab_dir) / VOCAB_FILE, "draft vocabulary", "run `eagle3 vocab` first and pass its folder as --vocab"
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
    from eagle3_core.contracts import hidden

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
    shape = safetensors_header(first)[hidden.NAMES["aux"]]["shape"]
    if len(shape) != 3 or shape[1] != 3 or shape[2] != hidden_size:
        raise InputError(
            f"hidden states do not match the target: aux_hidden_states is {shape}, expected [T, 3, {hidden_size}] "
            f"(the target's hidden_size)",
            path=str(first),
            fix="extract hidden/ with the same target you pass to --target",
        )
    manifest = read_manifest(hidden_dir)
    return table.num_rows, tokens, ExtractDetails.of(manifest).layers if manifest is not None else None


def check_sequences(sequences_dir: str | Path) -> tuple[int, int]:
    """(samples, tokens) of sequences/ for online mode; refuses an empty or damaged one."""
    from eagle3_core.contracts import sequences

    files = sequences.parts(sequences_dir)
    rows = sum(sequences.num_rows(f) for f in files)
    if rows == 0:
        raise InputError(
            f"empty dataset: no rows in {sequences_dir}/part-*.parquet",
            path=str(sequences_dir),
            fix="run `eagle3 reconstruct` first and pass its folder as --sequences",
        )
    return rows, sequences.token_total(sequences_dir)
