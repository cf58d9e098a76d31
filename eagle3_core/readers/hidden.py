"""hidden/ (written by extract): ``index.parquet`` and ``shard-NNNNN.safetensors``.

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

from eagle3_core.readers import parquet
from eagle3_core.readers.folder import check_listed, damaged

if TYPE_CHECKING:
    import pyarrow as pa

STAGE = "extract"
INDEX = "index.parquet"
TENSORS = ("aux_hidden_states", "final_hidden_states", "input_ids", "loss_mask")
HEADER_LIMIT = 100_000_000  # safetensors refuses larger headers too


def read_index(hidden_dir: str | Path, columns: list[str] | None = None) -> "pa.Table":
    return parquet.read_table(Path(hidden_dir) / INDEX, STAGE, columns)


def header(path: str | Path) -> dict:
    """name -> {dtype, shape, data_offsets}, plus ``__metadata__``; a missing or torn file is named."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if length > HEADER_LIMIT:
                raise ValueError(f"header length {length} is not plausible")
            found = json.loads(fh.read(length))
    except FileNotFoundError:
        raise damaged(path, "the file is missing", STAGE) from None
    except (OSError, struct.error, ValueError) as exc:
        raise damaged(path, f"unreadable safetensors header ({exc})", STAGE) from None
    found["__header_bytes__"] = 8 + length
    return found


def check_shard(path: str | Path) -> dict:
    """The shard's header, after checking it holds the four tensors and is exactly its declared size."""
    path = Path(path)
    found = header(path)
    missing = [t for t in TENSORS if t not in found]
    if missing:
        raise damaged(path, f"lacks tensors {missing}", STAGE)
    end = max(found[t]["data_offsets"][1] for t in found if not t.startswith("__"))
    expected, size = found["__header_bytes__"] + end, path.stat().st_size
    if size != expected:
        raise damaged(path, f"{size} bytes, its header says {expected} (truncated or overwritten)", STAGE)
    return found


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
