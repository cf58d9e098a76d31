"""hidden/ (written by extract, and a spool unit too): ``index.parquet`` and ``shard-NNNNN.safetensors``.

A shard of T tokens at width H holds, in this order (the safetensors layout, no pickle):

    aux_hidden_states    bf16  [T, 3, H]   (low, mid, high in the manifest's `layers` order)
    final_hidden_states  bf16  [T, H]      (after the target's final norm)
    input_ids            int32 [T]
    loss_mask            uint8 [T]

so a token costs ``state_bytes_per_token(H)`` = 4·H·2 bytes of states (32 KiB at H = 4096) plus
5 of ids and mask. A shard is whole iff its size is what its header declares.

``verify`` is what a consumer runs before trusting the folder: every shard the manifest lists
is there with its recorded size (and checksum, when asked), and every shard the index names
exists, its safetensors header parses, it holds the four tensors, and its size is exactly what
the header says (a truncated shard fails here in milliseconds, not inside a trainer).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts import header as safetensors_header
from eagle3_core.contracts import parquet
from eagle3_core.contracts.folder import check_listed, damaged

if TYPE_CHECKING:
    import pyarrow as pa

STAGE = "extract"
INDEX = "index.parquet"
FORMAT = "eagle3-hidden-v1"  # every shard's and unit's ``__metadata__.format``
# A train batch's keys and the tensor each is read from.
NAMES = {"input_ids": "input_ids", "aux": "aux_hidden_states", "final": "final_hidden_states", "loss_mask": "loss_mask"}
TENSORS = tuple(NAMES.values())
ID_MASK_BYTES = 5  # int32 id + uint8 mask per token
# A spool unit carries the blake2b of its tensor bytes in its own header, so the check travels with
# the file (over HTTP too): written as UNSEALED, overwritten in place once the bytes are written.
SEAL = "data_blake2b"
UNSEALED = "0" * 64


def state_bytes_per_token(hidden_size: int) -> int:
    """The hidden-state bytes of one token: 4 states x H x 2 (bf16)."""
    return 4 * hidden_size * 2


def token_bytes(hidden_size: int) -> int:
    """A token's bytes in a shard: its states plus its id and mask."""
    return state_bytes_per_token(hidden_size) + ID_MASK_BYTES


def tensor_layout(tokens: int, hidden: int) -> list[tuple[str, str, list[int], int]]:
    """(name, dtype, shape, bytes per token) in file order."""
    return [
        (NAMES["aux"], "BF16", [tokens, 3, hidden], 3 * hidden * 2),
        (NAMES["final"], "BF16", [tokens, hidden], hidden * 2),
        (NAMES["input_ids"], "I32", [tokens], 4),
        (NAMES["loss_mask"], "U8", [tokens], 1),
    ]


def build_header(tokens: int, hidden: int, metadata: dict[str, str]) -> bytes:
    """The safetensors header (8-byte length + JSON padded to 8 bytes)."""
    found: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for name, dtype, shape, per_token in tensor_layout(tokens, hidden):
        found[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + per_token * tokens]}
        offset += per_token * tokens
    raw = json.dumps(found, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def read_metadata(path: str | Path) -> dict[str, str] | None:
    """A shard's ``__metadata__`` from its header, or None when the file is missing or torn."""
    return safetensors_header.metadata(path)


def finished_key(path: str | Path) -> str | None:
    meta = read_metadata(path)
    return None if meta is None else meta.get("shard_key")


def read_index(hidden_dir: str | Path, columns: list[str] | None = None) -> "pa.Table":
    return parquet.read_table(Path(hidden_dir) / INDEX, STAGE, columns)


def header(path: str | Path, stage: str = STAGE) -> dict:
    """name -> {dtype, shape, data_offsets}, plus ``__metadata__``; a missing or torn file is named."""
    path = Path(path)
    try:
        found, length = safetensors_header.read_header(path)
    except FileNotFoundError:
        raise damaged(path, "the file is missing", stage) from None
    except (OSError, ValueError) as exc:
        raise damaged(path, f"unreadable safetensors header ({exc})", stage) from None
    found["__header_bytes__"] = length
    return found


def layout_problem(found: dict, size: int) -> str | None:
    """What is wrong with a parsed shard header against the file's ``size``, or None."""
    missing = [t for t in TENSORS if t not in found]
    if missing:
        return f"lacks tensors {missing}"
    end = max(found[t]["data_offsets"][1] for t in found if not t.startswith("__"))
    expected = found["__header_bytes__"] + end
    if size != expected:
        return f"{size} bytes, its header says {expected} (truncated or overwritten)"
    return None


def check_shard(path: str | Path, stage: str = STAGE) -> dict:
    """The shard's header, after checking it holds the four tensors and is exactly its declared size."""
    path = Path(path)
    found = header(path, stage)
    problem = layout_problem(found, path.stat().st_size)
    if problem:
        raise damaged(path, problem, stage)
    return found


def data_digest(path: str | Path, header_bytes: int) -> str:
    """blake2b of the tensor bytes (everything after the header)."""
    import hashlib

    digest = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        fh.seek(header_bytes)
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def seal_problem(found: dict, path: str | Path) -> str | None:
    """A sealed file's tensor bytes against the digest its header carries (``SEAL``), or None."""
    sealed = (found.get("__metadata__") or {}).get(SEAL)
    if sealed is None or sealed == UNSEALED:
        return f"it carries no {SEAL} (a unit is sealed when written)"
    if data_digest(path, found["__header_bytes__"]) != sealed:
        return f"its tensor bytes differ from the {SEAL} it was written with (the bytes changed)"
    return None


def is_whole(path: str | Path) -> bool:
    """True when ``check_shard`` would pass (for a resume decision, where damage means redo)."""
    from eagle3_core.errors import InputError

    try:
        check_shard(path)
    except InputError:
        return False
    return True


def verify(hidden_dir: str | Path, checksums: bool = False) -> list[str]:
    """Check every shard the index names (see the module docstring), and with ``checksums`` each
    one's blake2b against the manifest; their names in index order."""
    hidden_dir = Path(hidden_dir)
    check_listed(hidden_dir, STAGE, verify=checksums or None)
    names = list(dict.fromkeys(read_index(hidden_dir, ["shard"]).column("shard").to_pylist()))
    for name in names:
        check_shard(hidden_dir / name)
    return names
