"""Every shard a stage writes carries its size and checksum, so rot is named, never trained on.

The record is made when the shard is written (``fsio.atomic_path(path, record=True)`` calls
``record_shard``): one line ``{"name", "bytes", "mtime_ns", "blake2b"}`` appended to the
ledger ``.shards.jsonl`` in the shard's own folder (one small append per shard, atomic under
O_APPEND, so worker processes of one stage can record side by side). When the stage completes,
``shard_records`` turns the ledger into the manifest's ``shards`` map (path relative to the
stage folder -> ``ShardRecord``); a shard with no ledger line (written by a process that does
not record, or carried over from another folder) is hashed then.

Checks, for stages (skip) and readers (before reading):
- ``check_shards(stage_dir, shards, verify=False)``: every listed shard exists with its size;
  with ``verify=True`` its blake2b too. A missing shard is returned (the stage redoes it); a
  wrong one raises ``ShardError`` naming it, with the fix "delete it and rerun".
- ``shard_problem(path, record, verify)``: one shard against its record, the check behind both
  (readers raise its answer as ``contracts.folder.damaged``).

blake2b (hashlib, no extra package) hashed 256 MiB in 0.77 s (333 MiB/s, one core of a busy
2-core machine): a check of a 32 GB hidden/ folder costs one to two minutes, which is why the
skip checks sizes and ``verify`` is opt-in (``EAGLE3_VERIFY=1`` turns it on for every stage).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field

from eagle3_core.base import StrictModel
from eagle3_core.errors import InputError

LEDGER = ".shards.jsonl"
CHUNK = 1 << 20
REDO_FIX = "delete it and rerun: the stage redoes that shard"


class ShardRecord(StrictModel):
    """One shard as it was written."""

    bytes: int = Field(description="File size in bytes.")
    blake2b: str = Field(description="blake2b (32-byte digest) of the file, hex.")


class ShardError(InputError):
    """A shard listed in a manifest is not the file that was written."""


def file_digest(path: str | os.PathLike[str]) -> str:
    digest = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def record_shard(path: str | os.PathLike[str]) -> ShardRecord:
    """Append ``path``'s size and checksum to its folder's ledger (call right after writing it)."""
    path = Path(path)
    stat = path.stat()
    record = ShardRecord(bytes=stat.st_size, blake2b=file_digest(path))
    line = json.dumps({"name": path.name, "mtime_ns": stat.st_mtime_ns, **record.model_dump()}) + "\n"
    fd = os.open(path.parent / LEDGER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return record


def _ledger(folder: Path) -> dict[str, dict]:
    """name -> its last ledger line (a rewritten shard's newest record wins)."""
    path = folder / LEDGER
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a crash: that shard is hashed afresh
            continue
        found[entry["name"]] = entry
    return found


def shard_records(stage_dir: str | os.PathLike[str], files: Iterable[Path]) -> dict[str, ShardRecord]:
    """The manifest's ``shards`` map for ``files`` (under ``stage_dir``), from their ledgers.

    A file changed since its ledger line (other size or mtime) is damage, not a new version:
    every writer that records does so right after writing.
    """
    stage_dir, ledgers, records = Path(stage_dir), {}, {}
    for file in sorted(Path(f) for f in files):
        ledger = ledgers.setdefault(file.parent, _ledger(file.parent))
        name, stat, entry = file.relative_to(stage_dir).as_posix(), file.stat(), ledger.get(file.name)
        if entry is None:
            records[name] = ShardRecord(bytes=stat.st_size, blake2b=file_digest(file))
        elif (entry["bytes"], entry["mtime_ns"]) != (stat.st_size, stat.st_mtime_ns):
            raise ShardError(
                f"shard {name} changed after it was written ({stat.st_size} bytes, written as {entry['bytes']})",
                path=str(file),
                fix=REDO_FIX,
            )
        else:
            records[name] = ShardRecord(bytes=entry["bytes"], blake2b=entry["blake2b"])
    return records


MISSING = "the file is missing (its folder's manifest lists it)"


def shard_problem(path: str | os.PathLike[str], record: ShardRecord, verify: bool) -> str | None:
    """What is wrong with a listed shard against its record (``MISSING``, its size, or with ``verify``
    its checksum), or None when it holds: the one check behind a stage's skip and a reader's."""
    path = Path(path)
    if not path.is_file():
        return MISSING
    size = path.stat().st_size
    if size != record.bytes:
        return f"{size} bytes, its manifest recorded {record.bytes} (truncated or overwritten)"
    if verify and file_digest(path) != record.blake2b:
        return "its blake2b checksum differs from its manifest's (the bytes changed)"
    return None


def check_shards(stage_dir: str | os.PathLike[str], shards: dict[str, ShardRecord], verify: bool = False) -> list[str]:
    """The listed shards that are missing (the stage redoes them); ``ShardError`` on the first damaged one."""
    missing = []
    for name, record in shards.items():
        problem = shard_problem(Path(stage_dir) / name, record, verify)
        if problem == MISSING:
            missing.append(name)
        elif problem:
            raise ShardError(f"shard {name}: {problem}", path=str(Path(stage_dir) / name), fix=REDO_FIX)
    return missing


def verify_requested() -> bool:
    """``EAGLE3_VERIFY=1``: every stage checks full checksums, not only sizes, before it skips."""
    return os.environ.get("EAGLE3_VERIFY", "") not in ("", "0", "false", "no")
