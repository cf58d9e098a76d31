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


def environ(pid: int) -> dict[str, str]:
    """The process's environment as it started (empty when it is gone or not ours to read): a test
    finds its own children by a variable it set, not another xdist worker's by their command line."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, _, value in pairs}


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


def start_session(args: list[str], env: dict, log: Path, cwd: Path | None = None):
    """A child in its own session, its output in ``log``: stopping it stops everything it started."""
    import subprocess

    return subprocess.Popen(
        args, env=env, cwd=cwd, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop_session(process) -> None:
    """SIGTERM the child's whole session, SIGKILL after 30 s."""
    import signal
    import subprocess

    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_healthy(health_url: str, process, timeout: float, what: str, log: Path) -> None:
    """Until ``health_url`` answers 200 from ``process``'s own session (``start_session``): a free port can
    be taken meanwhile by another worker's server, whose answer is not this one's. A child that exits, a
    timeout or a taken port fails with the log's tail."""
    import time
    from urllib.parse import urlsplit

    from eagle3_core.ports import listener_group

    deadline = time.monotonic() + timeout
    while not _answers(health_url):
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"{what} did not start; its log:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    group = listener_group(urlsplit(health_url).port)
    if group not in (None, process.pid):
        raise AssertionError(f"another process (group {group}) took {what}'s port; its log:\n{log.read_text()[-3000:]}")


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
