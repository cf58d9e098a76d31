"""Atomic file writes: a reader never sees a half-written file.

Every writer goes through ``atomic_path``: it yields a temporary path beside the target,
``<name>.<pid>-<random>.tmp``, and ``os.replace``s it into place only when the block finishes
without error, so a killed process leaves either the old file or the new one, plus at most a
stray ``*.tmp`` that readers ignore. The temp name is unique per process and per call, so two
processes writing one name never share (or delete) each other's temp file.

``record=True`` marks the file a shard of its stage: once it is in place, its size and checksum
go to the folder's shard ledger (``eagle3_core.checksums``), from which the stage's manifest
lists them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def temp_name(final: Path) -> Path:
    """A temp path beside ``final`` that no other process or call uses."""
    return final.with_name(f"{final.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], record: bool = False) -> Iterator[Path]:
    """Yield a temporary path; on success fsync it and rename it over ``path``."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(final)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    if record:
        from eagle3_core.checksums import record_shard

        record_shard(final)


def stray_temps(directory: str | os.PathLike[str]) -> list[Path]:
    """Temp files in ``directory`` left by processes that are gone (never a live process's)."""
    strays = []
    for tmp in Path(directory).glob("*.tmp"):
        match = re.search(r"\.(\d+)-[0-9a-f]+\.tmp$", tmp.name)
        if match is None or not _alive(int(match.group(1))):
            strays.append(tmp)
    return strays


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))
