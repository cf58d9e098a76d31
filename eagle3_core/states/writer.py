"""hidden/ shard files (and spool units): safetensors written in place, batch by batch, never held
whole in memory.

The header is written first (shapes are known from the plan), the file is sized, and each
batch writes its samples at their token offsets, so memory stays at one batch and a shard of
2 GiB costs 2 GiB of disk and nothing more: the only overhead is the JSON header (< 1 KiB).
The shard's ``key`` goes into ``__metadata__``; ``contracts.hidden.finished_key`` reads it back
from the header alone, which is how resume decides that a shard is done.

``refuse_non_finite`` is the one NaN/Inf check on hidden states: the writers here (extract's shards,
the spool's units) and the trainer's readers (states read from hidden/, or made in process) call it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts.folder import redo_fix
from eagle3_core.contracts.hidden import NAMES, build_header, tensor_layout
from eagle3_core.errors import InputError, StageError

if TYPE_CHECKING:
    import torch

TARGET_FIX = (
    "check the target's weights and dtype (fp16 overflows; use bf16 or fp32), or drop this sample from sequences/"
)


class ShardWriter:
    """Writes one shard's tensors at token offsets into a pre-sized file."""

    def __init__(self, path: str | Path, tokens: int, hidden: int, metadata: dict[str, str]) -> None:
        self.tokens, self.hidden = tokens, hidden
        header = build_header(tokens, hidden, metadata)
        self._starts: dict[str, tuple[int, int]] = {}
        offset = len(header)
        for name, _, _, per_token in tensor_layout(tokens, hidden):
            self._starts[name] = (offset, per_token)
            offset += per_token * tokens
        self.size = offset
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.pwrite(self._fd, header, 0)
        os.ftruncate(self._fd, self.size)

    def write(
        self,
        offset: int,
        aux: "torch.Tensor",
        final: "torch.Tensor",
        input_ids: "torch.Tensor",
        loss_mask: "torch.Tensor",
    ) -> None:
        """One sample (or run of samples) at token ``offset``: aux [n,3,H], final [n,H], ids [n], mask [n]."""
        import torch

        n = aux.shape[0]
        assert aux.shape == (n, 3, self.hidden) and final.shape == (n, self.hidden), (aux.shape, final.shape)
        assert 0 <= offset and offset + n <= self.tokens
        for name, tensor, dtype in (
            (NAMES["aux"], aux, torch.bfloat16),
            (NAMES["final"], final, torch.bfloat16),
            (NAMES["input_ids"], input_ids, torch.int32),
            (NAMES["loss_mask"], loss_mask, torch.uint8),
        ):
            start, per_token = self._starts[name]
            data = tensor.to(device="cpu", dtype=dtype).contiguous().view(torch.uint8).numpy()
            os.pwrite(self._fd, memoryview(data).cast("B"), start + offset * per_token)

    def close(self) -> None:
        os.close(self._fd)


def seal(path: str | Path) -> str:
    """Write the digest of a finished file's tensor bytes over its ``UNSEALED`` placeholder (same
    length, so no offset moves); returns it."""
    from eagle3_core.contracts.header import read_header
    from eagle3_core.contracts.hidden import SEAL, UNSEALED, data_digest

    _, length = read_header(path)
    digest = data_digest(path, length)
    with open(path, "r+b") as fh:
        head = fh.read(length)
        at = head.index(f'"{SEAL}":"{UNSEALED}"'.encode()) + len(f'"{SEAL}":"')
        fh.seek(at)
        fh.write(digest.encode())
    return digest


def refuse_non_finite(aux, final, sample_id: str, path: str | Path, written_by: str | None = None) -> None:
    """Stop on NaN/Inf hidden states of one sample before they are written or trained on: one error
    naming the sample and its file (DeepSpeed's fp16 overflow skip would otherwise be their only trace).

    States the target has just made (extract, a spool unit, online training: ``written_by`` None) are
    the target's fault: a ``StageError`` whose fix is its weights and dtype. States read back from a
    stage's file (``written_by``, the stage that wrote it) are a damaged input: an ``InputError`` whose
    fix redoes that shard. Checked per sample, so the name is right whatever the batch layout."""
    import torch

    if bool(torch.isfinite(aux).all()) and bool(torch.isfinite(final).all()):
        return
    if written_by is None:
        raise StageError(
            f"the target produced NaN or Inf in the hidden states of sample {sample_id}",
            sample_id=sample_id,
            path=str(path),
            fix=TARGET_FIX,
        )
    raise InputError(
        f"NaN or Inf in the hidden states of sample {sample_id}",
        sample_id=sample_id,
        path=str(path),
        fix=redo_fix(written_by),
    )
