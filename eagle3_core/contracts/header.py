"""A safetensors file's JSON header, read without torch or the tensor bytes.

Layout: an 8-byte little-endian length, then that many bytes of JSON (``name -> {dtype, shape,
data_offsets}`` plus an optional ``__metadata__`` of strings), then the tensor bytes. A header
over ``HEADER_LIMIT`` is refused, as safetensors itself refuses it.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

HEADER_LIMIT = 100_000_000


def read_header(path: str | Path) -> tuple[dict, int]:
    """(the parsed header, its length in bytes with the 8-byte prefix); ``OSError`` or ``ValueError``
    for a missing or torn file."""
    with open(path, "rb") as fh:
        prefix = fh.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{len(prefix)} bytes, shorter than a header's length")
        (length,) = struct.unpack("<Q", prefix)
        if length > HEADER_LIMIT:
            raise ValueError(f"header length {length} is not plausible")
        return json.loads(fh.read(length)), 8 + length


def tensors(path: str | Path) -> dict:
    """name -> {dtype, shape, data_offsets}, the metadata left out."""
    found, _ = read_header(path)
    found.pop("__metadata__", None)
    return found


def metadata(path: str | Path) -> dict[str, str] | None:
    """The file's ``__metadata__``, or None when the file is missing or torn."""
    try:
        found, _ = read_header(path)
    except (OSError, ValueError):
        return None
    return found.get("__metadata__") or {}
