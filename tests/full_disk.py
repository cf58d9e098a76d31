"""A real full disk for the tests: a small tmpfs mounted on a test's folder (mounting needs root:
elsewhere the test skips and says so)."""

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(mount: Path, size: str) -> Iterator[Path]:
    """``mount`` on its own tmpfs of ``size`` (``256k``) for the block; ``resize`` grows it."""
    mount.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"a real full disk needs a tmpfs mount (root): {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def resize(mount: Path, size: str) -> None:
    """Make room on the disk, as an operator freeing space would."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True)


def fill(folder: Path) -> None:
    """Write zeros into ``folder`` until its disk is full."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
