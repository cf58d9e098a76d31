"""Start an engine process that dies with this one, and stop it: the one way eagle3 runs vLLM.

``start_engine`` runs the command under ``watchdog.py`` (same interpreter as eagle3, in a session
of its own): when this process dies, SIGKILL included, the watchdog stops the engine's whole
process group; when the engine dies, it kills what the engine left. ``stop_engine`` is the
orderly stop: SIGTERM to the group, SIGKILL after a grace period. The vLLM server
(``vllm_server.VLLMServer``, for serve, the pipeline and evaluate) and the extraction engine
(``engines.vllm_engine.VllmEngine``, for extract and online training) both start through here,
and so does Prefect's ephemeral API under the CLI (``flows.cli.watch_ephemeral_api``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

WATCHDOG = Path(__file__).resolve().with_name("watchdog.py")


class WatchedPopen(subprocess.Popen):
    """``subprocess.Popen(args, **popen)``, watched: the process is the watchdog, whose exit
    code is the engine's and whose process group holds every engine process. ``terminate`` and
    ``kill`` signal that whole group (the watchdog alone ignores SIGTERM), so code written for a
    plain Popen, Prefect's ephemeral API among it, stops the engine it started."""

    def __init__(self, args: list[str], **popen) -> None:  # `args`, as Popen names it (Prefect passes it so)
        watched = [sys.executable, str(WATCHDOG), str(os.getpid()), "--", *args]
        super().__init__(watched, start_new_session=True, **popen)

    def terminate(self) -> None:
        signal_group(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        signal_group(self.pid, signal.SIGKILL)


def start_engine(command: list[str], **popen) -> subprocess.Popen:
    """The engine ``command``, watched (``WatchedPopen``)."""
    return WatchedPopen(command, **popen)


def stop_engine(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the engine's group, SIGKILL it after ``grace`` seconds; idempotent."""
    if proc.poll() is None:
        signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    signal_group(proc.pid, signal.SIGKILL)  # engine workers that outlived the API process


def signal_group(pid: int, sig: int) -> None:
    """Signal the session started for ``pid`` (its process group id is its pid)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
