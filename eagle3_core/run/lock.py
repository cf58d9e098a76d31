"""One writer per stage folder: an OS file lock on ``<folder>/.lock``, held for the run.

``fcntl.flock`` belongs to the open file: the kernel drops it the moment the holder exits,
killed or not, so a lock is never stale and nothing needs cleaning. The holder writes
``pid host`` into the file, so a second run refuses at once with a line naming it.

Within one process the lock is re-entrant (a flow and the core it calls both take it): a
count per folder, the file released when the last holder lets go. Local file systems only:
flock on NFS is advisory at best. The file is opened without following links (``O_NOFOLLOW``), and
a full disk there is one ``DiskFullError`` naming the folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from eagle3_core.errors import StageError
from eagle3_core.run.fsio import no_space_as_error

LOCK_NAME = ".lock"
_held: dict[Path, list] = {}  # folder -> [fd, count]
_guard = threading.Lock()


class FolderBusyError(StageError):
    """Another live process is writing this stage folder."""


def acquire(folder: str | os.PathLike[str]) -> None:
    """Take ``folder``'s lock or raise ``FolderBusyError`` naming the holder."""
    folder = Path(folder).resolve()
    with _guard:
        if folder in _held:
            _held[folder][1] += 1
            return
        with no_space_as_error(folder):
            _held[folder] = [_lock_file(folder), 1]


def _lock_file(folder: Path) -> int:
    """The locked ``.lock`` of ``folder``, holding this process's pid line."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = _open_lock(folder / LOCK_NAME)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
        os.close(fd)
        raise FolderBusyError(
            f"another run is writing {folder} ({holder})",
            fix="wait for it to finish, or pass another --out",
            path=str(folder),
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_lock(path: Path) -> int:
    """Open the lock file without following a link: a ``.lock`` that is a symlink would have the
    file it points to truncated and overwritten with the pid line."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise StageError(
            f"{path} is a symbolic link (to {os.readlink(path)}); a lock file is never followed",
            path=str(path),
            fix="delete the link (what it points to is untouched) and rerun",
        ) from None


def release(folder: str | os.PathLike[str]) -> None:
    """Let go of one hold; the last one unlocks (a folder not held is a no-op)."""
    folder = Path(folder).resolve()
    with _guard:
        entry = _held.get(folder)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _held[folder]
            os.close(entry[0])  # closing the file drops the flock


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str]) -> Iterator[None]:
    acquire(folder)
    try:
        yield
    finally:
        release(folder)


def is_held(folder: str | os.PathLike[str]) -> bool:
    """True while this process holds ``folder``'s lock."""
    return Path(folder).resolve() in _held
