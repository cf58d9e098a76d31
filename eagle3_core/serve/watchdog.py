"""Run an engine so that it dies with the process that started it, SIGKILL included.

    python watchdog.py PARENT_PID -- COMMAND ...

Started by ``eagle3_core.serve.process.start_engine`` as the leader of its own session; COMMAND
runs as its child in that one process group, and so do the processes the engine starts itself
(vLLM's EngineCore and Worker). The watchdog waits on two pidfds, its parent's and its child's:

- the parent is gone (killed with SIGKILL too: nothing in the parent has to run): SIGTERM to the
  group, then after ``GRACE_S`` SIGKILL to whatever is left, and exit;
- the child exited: SIGKILL to whatever it left in the group (an api_server killed alone left
  EngineCore and Worker serving, 2 GB), and exit with the child's code, so the starter reads it.

A SIGTERM to the group (the starter's own stop) reaches the engine directly; the watchdog stays
to reap it and the leftovers, then removes the engine's socket folder: vLLM binds its ZeroMQ sockets
as files in ``$VLLM_RPC_BASE_PATH`` (the temp folder by default) and leaves them behind when it is
stopped, some thousands in /tmp after a day of runs; the watchdog gives it a folder of its own
(``eagle3-ipc-*``) unless the environment names one. A pidfd, not PR_SET_PDEATHSIG: the kernel sends that signal when the
parent *thread* exits, and Prefect starts engines from worker threads. Standard library only, run
by path with any Python (it imports nothing of eagle3).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

GRACE_S = 10.0  # vLLM stops within a second of SIGTERM (measured here); a GPU engine takes a few


def group_members() -> list[int]:
    """The other live processes of this process group."""
    group, found = os.getpgid(0), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.getpgid(int(entry)) == group:
                    found.append(int(entry))
            except ProcessLookupError:
                continue
    return found


def kill_leftovers() -> None:
    for pid in group_members():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_group(child: subprocess.Popen) -> None:
    """SIGTERM the group (this process ignores it), SIGKILL what is left after the grace period."""
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    kill_leftovers()
    child.wait()


def detach_stdio() -> None:
    """Hold no end of the engine's pipes: the starter sees EOF the moment the engine exits."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)


def main(argv: list[str]) -> int:
    parent, command = int(argv[0]), argv[argv.index("--") + 1 :]
    signal.signal(signal.SIGTERM, lambda *_: None)  # a handler, not SIG_IGN: the engine gets the default back
    try:
        parent_fd = os.pidfd_open(parent)
    except ProcessLookupError:
        return 1  # the starter is already gone: start nothing
    if os.getppid() != parent:  # it died before the pidfd was opened (and its pid may be another's now)
        return 1
    ipc = None if "VLLM_RPC_BASE_PATH" in os.environ else tempfile.mkdtemp(prefix="eagle3-ipc-")
    env = os.environ if ipc is None else {**os.environ, "VLLM_RPC_BASE_PATH": ipc}
    try:
        return watch(parent_fd, subprocess.Popen(command, env=env))
    finally:
        if ipc is not None:
            shutil.rmtree(ipc, ignore_errors=True)


def watch(parent_fd: int, child: subprocess.Popen) -> int:
    """Wait for the parent or the child to go; the child's exit code (1 when the parent went first)."""
    detach_stdio()
    child_fd = os.pidfd_open(child.pid)
    ready, _, _ = select.select([parent_fd, child_fd], [], [])
    if child_fd in ready:
        code = child.wait()
        kill_leftovers()
        return code if code >= 0 else 128 - code
    stop_group(child)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
