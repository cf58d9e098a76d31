"""A model directory known by its bytes, not its path: the target's and the drafter's input key.

``model_fingerprint(path)`` hashes, for every file in the directory (sorted, hidden files left
out): its name and size, and
- a ``.safetensors`` file: its header (tensor names, dtypes, shapes, offsets) and ``SAMPLES``
  blocks of ``BLOCK`` bytes spread evenly over the tensor data;
- any other file (config.json, the tokenizer, chat template, code): its bytes when under
  ``WHOLE_LIMIT``, else the same sampled blocks.

Weights retrained or replaced in place change the header or every block, so the key changes and
extract, train and evaluate redo their work; the same bytes at another path (a copied run, a
moved model) keep it. The cost is independent of the model's size beyond the file count: 16
blocks of 64 KiB per file, about 64 MiB read for a 1 TB target in 64 files, where a full blake2b
(333 MiB/s here) would take 50 minutes at every start.

A change that touches no sampled block (a few flipped bytes) is seen under ``--verify``
(``EAGLE3_VERIFY=1``): then the full blake2b of the files is taken too and kept beside the quick
key in ``$EAGLE3_CACHE/fingerprints/`` (default ``~/.cache/eagle3``); a full hash that differs
from the one kept for the same quick key gives another key, so the stages redo their work.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from eagle3_core.run.checksums import verify_requested

BLOCK = 64 * 1024
SAMPLES = 16
WHOLE_LIMIT = 16 * 1024 * 1024  # config, tokenizer (Qwen3's tokenizer.json: 11 MiB) hashed whole
CHUNK = 1 << 20


def model_fingerprint(path: str | os.PathLike[str], verify: bool | None = None, leave_out: tuple[str, ...] = ()) -> str:
    """The key of the model in ``path``: ``model:<hex>`` (see the module docstring); files named in
    ``leave_out`` are not part of it (a drafter's model card, which evaluate rewrites)."""
    files = [f for f in model_files(Path(path)) if f.name not in leave_out]
    quick = hashlib.blake2b(digest_size=16)
    for file in files:
        quick.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        quick.update(quick_digest(file))
    key = f"model:{quick.hexdigest()}"
    if verify_requested() if verify is None else verify:
        return checked_in_full(key, files)
    return key


def model_files(root: Path) -> list[Path]:
    """Every regular file of the model directory, in name order (no hidden files, no temp files)."""
    return sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix != ".tmp")


def quick_digest(file: Path) -> bytes:
    """A safetensors file's header and sampled data; another file whole when small, else sampled."""
    size = file.stat().st_size
    with open(file, "rb") as fh:
        start = safetensors_data_start(fh, size) if file.suffix == ".safetensors" else 0
        if start == 0 and size <= WHOLE_LIMIT:
            return hashlib.blake2b(fh.read(), digest_size=16).digest()
        digest = hashlib.blake2b(digest_size=16)
        fh.seek(0)
        digest.update(fh.read(start))  # the header: every tensor's name, dtype, shape and offsets
        for offset in sample_offsets(start, size):
            fh.seek(offset)
            digest.update(fh.read(BLOCK))
        return digest.digest()


def safetensors_data_start(fh, size: int) -> int:
    """Where a safetensors file's tensor data starts (8-byte header length + header); 0 when the
    file is not one (too short, or a header length past its end)."""
    head = fh.read(8)
    if len(head) < 8:
        return 0
    (length,) = struct.unpack("<Q", head)
    return 8 + length if 8 + length <= size else 0


def sample_offsets(start: int, size: int) -> list[int]:
    """``SAMPLES`` block offsets spread evenly from ``start`` to the end, the last block included."""
    span = max(size - start - BLOCK, 0)
    return sorted({start + span * i // (SAMPLES - 1) for i in range(SAMPLES)})


def checked_in_full(key: str, files: list[Path]) -> str:
    """``key`` when the files' full blake2b is the one kept for it (or none was kept yet: it is
    kept now), else a key that names the full hash too."""
    full = hashlib.blake2b(digest_size=16)
    for file in files:
        full.update(f"{file.name}\0".encode())
        with open(file, "rb") as fh:
            while chunk := fh.read(CHUNK):
                full.update(chunk)
    record = fingerprint_cache() / f"{key.removeprefix('model:')}.json"
    kept = json.loads(record.read_text(encoding="utf-8"))["blake2b"] if record.exists() else None
    if kept is None:
        from eagle3_core.run.fsio import write_json_atomic

        write_json_atomic(record, {"blake2b": full.hexdigest()})
    return key if kept in (None, full.hexdigest()) else f"{key}+{full.hexdigest()}"


def fingerprint_cache() -> Path:
    from eagle3_core.run.fsio import cache_root

    return cache_root() / "fingerprints"
