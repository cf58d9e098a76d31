"""Damage a stage folder the way disks and people do, and prove that nothing else changed."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path


def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut ``path`` to ``keep`` of its bytes (a copy that stopped half-way)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


LOCK = ".lock"  # the folder's OS lock (eagle3_core.run.lock): taken by every run, it holds no output


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every output file under ``folder`` by relative path ({} when there is none)."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK
    }


def flip(path: Path, count: int = 64) -> None:
    """Invert ``count`` bytes in the middle of ``path``: same size, other content (bit rot)."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + count] = bytes(255 - b for b in data[middle : middle + count])
    path.write_bytes(bytes(data))


def list_shards(folder: Path, stage: str, *patterns: str) -> None:
    """A complete manifest for ``folder`` listing its files matching ``patterns`` with their sizes
    and checksums, as the stage's lifecycle writes it (for folders a test built by hand)."""
    from eagle3_core.run.checksums import shard_records
    from eagle3_core.run.manifest import StageManifest, read_manifest, write_manifest

    files = sorted(p for pattern in patterns for p in folder.glob(pattern))
    manifest = read_manifest(folder) or StageManifest(stage=stage, status="complete", config_hash="test")
    manifest.status, manifest.shards = "complete", shard_records(folder, files)
    write_manifest(folder, manifest)


@contextlib.contextmanager
def held(folder: Path) -> Iterator[int]:
    """Another process holds ``folder``'s lock (a concurrent run) while the block runs; its pid."""
    root = Path(__file__).resolve().parents[1]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from eagle3_core.run.lock import acquire; "
            "acquire(sys.argv[1]); print('held', flush=True); time.sleep(300)",
            str(folder),
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def busy_line(folder: Path, pid: int) -> str:
    return f"error: another run is writing {folder.resolve()} (pid {pid} on host {socket.gethostname()})"


def refused_while_held(folder: Path, run: Callable[[], str]) -> None:
    """``run`` (a CLI run into ``folder``, its stderr) while another process holds the folder:
    the one busy line, and nothing in the folder changed."""
    from tests.cli_helpers import error_line

    before = snapshot(folder)
    with held(folder) as pid:
        err = run()
    assert error_line(err) == busy_line(folder, pid)
    assert snapshot(folder) == before
