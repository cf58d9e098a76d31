"""hidden/ shard files: safetensors written in place, batch by batch, never held whole in memory.

A shard of T tokens at width H is, in this order (the safetensors layout, no pickle):

    aux_hidden_states    bf16  [T, 3, H]   (low, mid, high in the manifest's `layers` order)
    final_hidden_states  bf16  [T, H]      (after the target's final norm)
    input_ids            int32 [T]
    loss_mask            uint8 [T]

The header is written first (shapes are known from the plan), the file is sized, and each
batch writes its samples at their token offsets, so memory stays at one batch and a shard of
2 GiB costs 2 GiB of disk and nothing more: the only overhead is the JSON header (< 1 KiB).
The shard's ``key`` goes into ``__metadata__``; ``finished_key`` reads it back from the header
alone, which is how resume decides that a shard is done.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

BYTES_PER_TOKEN_PER_STATE = 2  # bf16
HEADER_LIMIT = 100_000_000  # safetensors refuses larger headers too


def tensor_layout(tokens: int, hidden: int) -> list[tuple[str, str, list[int], int]]:
    """(name, dtype, shape, bytes per token) in file order."""
    return [
        ("aux_hidden_states", "BF16", [tokens, 3, hidden], 3 * hidden * 2),
        ("final_hidden_states", "BF16", [tokens, hidden], hidden * 2),
        ("input_ids", "I32", [tokens], 4),
        ("loss_mask", "U8", [tokens], 1),
    ]


def build_header(tokens: int, hidden: int, metadata: dict[str, str]) -> bytes:
    """The safetensors header (8-byte length + JSON padded to 8 bytes)."""
    header: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for name, dtype, shape, per_token in tensor_layout(tokens, hidden):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + per_token * tokens]}
        offset += per_token * tokens
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


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
            ("aux_hidden_states", aux, torch.bfloat16),
            ("final_hidden_states", final, torch.bfloat16),
            ("input_ids", input_ids, torch.int32),
            ("loss_mask", loss_mask, torch.uint8),
        ):
            start, per_token = self._starts[name]
            data = tensor.to(device="cpu", dtype=dtype).contiguous().view(torch.uint8).numpy()
            os.pwrite(self._fd, memoryview(data).cast("B"), start + offset * per_token)

    def close(self) -> None:
        os.close(self._fd)


def read_metadata(path: str | Path) -> dict[str, str] | None:
    """A shard's ``__metadata__`` from its header, or None when the file is missing or torn."""
    try:
        with open(path, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if length > HEADER_LIMIT:
                return None
            return json.loads(fh.read(length)).get("__metadata__") or {}
    except (OSError, struct.error, ValueError):
        return None


def finished_key(path: str | Path) -> str | None:
    meta = read_metadata(path)
    return None if meta is None else meta.get("shard_key")
