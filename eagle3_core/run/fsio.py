"""Atomic file writes: a reader never sees a half-written file.

Every writer goes through ``atomic_path``: it yields a temporary path beside the target,
``<name>.<pid>-<random>.tmp``, and ``os.replace``s it into place only when the block finishes
without error, so a killed process leaves either the old file or the new one, plus at most a
stray ``*.tmp`` that readers ignore. The temp name is unique per process and per call, so two
processes writing one name never share (or delete) each other's temp file.

``record=True`` marks the file a shard of its stage: once it is in place, its size and checksum
go to the folder's shard ledger (``eagle3_core.run.checksums``), from which the stage's manifest
lists them.

A full disk is one error, ``DiskFullError`` naming the folder, wherever a write meets it (inside an
``atomic_path`` block, the lock, ``no_space_as_error``): never a raw ``OSError`` traceback. The
temp file goes, the old file stays, so the stage resumes once there is room. ``remove_tree``
clears a stage's own folder for real, or raises one error saying why it cannot.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eagle3_core.errors import StageError

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # no space left, quota exceeded: the same fix


class DiskFullError(StageError):
    """The disk holding a stage's folder is full."""


@contextlib.contextmanager
def no_space_as_error(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Turn a full disk met inside the block into one ``DiskFullError`` naming ``folder``."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as exc:
        why = no_space(exc) or out_of_room(folder, exc)
        if why is None:
            raise
        raise DiskFullError(
            f"no space left on the disk of {folder} ({why})",
            path=str(folder),
            fix="free space there (or point --out at a larger disk) and rerun: the stage resumes from its finished "
            "shards",
        ) from None


def no_space(exc: BaseException) -> str | None:
    """The words of a full disk behind ``exc``, else None. Not only an ``OSError``: the writers
    that wrap it lose its errno but keep its words (safetensors' ``SafetensorError`` and polars'
    errors say "No space left on device (os error 28)"), and so may a cause or context in the chain."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:
            return exc.strerror or os.strerror(exc.errno)
        text = str(exc)
        for code in NO_SPACE:
            if os.strerror(code) in text:
                return os.strerror(code)
        exc = exc.__cause__ or exc.__context__
    return None


ROOM = 1 << 20  # less free than this on the folder's disk when a write failed: the disk is the cause


def out_of_room(folder: str | os.PathLike[str], exc: BaseException) -> str | None:
    """A full disk that left no words: torch's zip writer (``torch.save``, so DeepSpeed's checkpoints)
    fails with a bare ``RuntimeError`` ("unexpected pos 576 vs 534", "file write failed") and drops
    the errno. It counts as the disk's when the folder's disk is indeed out of room."""
    if not isinstance(exc, RuntimeError):
        return None
    existing = next((p for p in (Path(folder), *Path(folder).parents) if p.exists()), None)
    try:
        free = shutil.disk_usage(existing).free if existing else ROOM
    except OSError:
        return None
    return f"{os.strerror(errno.ENOSPC)}: {free} bytes free" if free < ROOM else None


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` for real. A symbolic link goes as a link: what it points to is not this
    stage's to empty, and ``rmtree`` refuses a link (with ``ignore_errors`` that refusal was silent,
    and training resumed another config's checkpoints). What cannot go is one ``StageError``."""
    path = Path(path)
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
    except OSError as exc:
        raise StageError(
            f"cannot clear {path}: {exc.strerror}",
            path=str(path),
            fix="remove it yourself (or give this user write access to it), then rerun",
        ) from None


def plain_file_mode(path: str | os.PathLike[str]) -> None:
    """Give ``path`` the mode a file written with ``open`` gets (0666 less the umask). safetensors writes
    its files 0600: an export's weights then sat 0600 beside its 0644 card and config, unreadable to the
    serving user or a hub upload run by another account."""
    os.chmod(path, 0o666 & ~process_umask())


def process_umask() -> int:
    """The process's umask, read without setting it: ``os.umask`` can only be read by setting it, and
    for that moment a file any other thread creates would get mode 0666 (Linux >= 4.7 says it in
    /proc/self/status; elsewhere the set-and-restore is the only way)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_name(final: Path) -> Path:
    """A temp path beside ``final`` that no other process or call uses."""
    return final.with_name(f"{final.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], record: bool = False) -> Iterator[Path]:
    """Yield a temporary path; on success fsync it and rename it over ``path``."""
    final = Path(path)
    tmp = temp_name(final)
    with no_space_as_error(final.parent):
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            yield tmp
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
    if record:
        from eagle3_core.run.checksums import record_shard

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


def cache_root() -> Path:
    """eagle3's machine-wide cache: ``$EAGLE3_CACHE``, else ``~/.cache/eagle3`` (the toy targets, the
    fingerprints, the vLLM start times)."""
    return Path(os.environ.get("EAGLE3_CACHE") or Path.home() / ".cache" / "eagle3").expanduser()
