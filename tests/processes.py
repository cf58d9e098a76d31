"""What a test sees of processes through /proc: alive (a zombie is not), and a process group's live
members. Shared by the tests that kill a starter and look for what its engine left behind."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed child stays one until it is reaped)."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(entry)) == pgid and alive(int(entry)):
                found.append(int(entry))
        except ProcessLookupError:
            continue
    return found
