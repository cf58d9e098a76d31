"""Damage a stage folder the way disks and people do, and prove that nothing else changed."""

from __future__ import annotations

import hashlib
from pathlib import Path


def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut ``path`` to ``keep`` of its bytes (a copy that stopped half-way)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


LOCK = ".lock"  # the folder's OS lock (eagle3_core.lock): taken by every run, it holds no output


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every output file under ``folder`` by relative path ({} when there is none)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK}
