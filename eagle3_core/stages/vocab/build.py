"""Count supervised tokens and pick the draft vocabulary.

The draft vocabulary is the ``N`` most frequent supervised target ids (ties: lower id first),
``N = min(draft_vocab_size, target_vocab)``. When fewer than ``N`` ids were ever supervised,
the lowest unseen ids fill it up, so the drafter's lm_head always has exactly ``N`` rows
(as SpecForge and vLLM expect). Draft ids follow target-id order, so ``d2t`` is a monotone
offset table:

    target_id = draft_id + d2t[draft_id]        t2d[target_id] = target_id is in the draft vocab
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eagle3_core.errors import InputError


@dataclass(frozen=True)
class DraftVocab:
    d2t: np.ndarray  # int64 [draft_vocab]
    t2d: np.ndarray  # bool  [target_vocab]
    counts: np.ndarray  # int64 [target_vocab]

    @property
    def coverage(self) -> float:
        """Share of supervised tokens whose id is in the draft vocabulary."""
        total = int(self.counts.sum())
        return float(self.counts[self.t2d].sum()) / total if total else 0.0


def count_supervised(files: list[Path], target_vocab: int) -> np.ndarray:
    """Occurrences of each target id at loss_mask == 1, over every sequences/ shard."""
    from eagle3_core.contracts import sequences

    counts = np.zeros(target_vocab, dtype=np.int64)
    for file in files:
        table = sequences.read(file, ["input_ids", "loss_mask"])
        ids = table.column("input_ids").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        mask = table.column("loss_mask").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        if len(ids) != len(mask):
            raise InputError(
                "input_ids and loss_mask differ in length",
                path=str(file),
                fix="rerun `eagle3 reconstruct` for this directory",
            )
        supervised = ids[mask.astype(bool)].astype(np.int64)
        if supervised.size and (supervised.min() < 0 or supervised.max() >= target_vocab):
            raise InputError(
                f"token id {int(supervised.max())} is outside the target vocabulary ({target_vocab})",
                path=str(file),
                fix="build vocab with the tokenizer the sequences were made with",
            )
        counts += np.bincount(supervised, minlength=target_vocab)
    return counts


def select(counts: np.ndarray, draft_vocab_size: int) -> DraftVocab:
    """Top-N ids by count (see the module docstring)."""
    target_vocab = len(counts)
    size = min(draft_vocab_size, target_vocab)
    order = np.lexsort((np.arange(target_vocab), -counts))  # count desc, then id asc
    seen = order[counts[order] > 0][:size]
    if len(seen) < size:
        unseen = np.flatnonzero(counts == 0)[: size - len(seen)]
        seen = np.concatenate([seen, unseen])
    chosen = np.sort(seen).astype(np.int64)
    t2d = np.zeros(target_vocab, dtype=bool)
    t2d[chosen] = True
    d2t = chosen - np.arange(size, dtype=np.int64)
    return DraftVocab(d2t=d2t, t2d=t2d, counts=counts)


def save(vocab: DraftVocab, path: Path) -> None:
    """``vocab.safetensors`` (d2t, t2d, counts), atomically."""
    import torch
    from safetensors.torch import save_file

    from eagle3_core.run.fsio import atomic_path, plain_file_mode

    tensors = {
        "d2t": torch.from_numpy(vocab.d2t),
        "t2d": torch.from_numpy(vocab.t2d),
        "counts": torch.from_numpy(vocab.counts),
    }
    with atomic_path(path, record=True) as tmp:
        save_file(tensors, str(tmp))
        plain_file_mode(tmp)
