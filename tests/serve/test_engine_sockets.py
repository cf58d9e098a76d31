"""An engine's socket files go with it: vLLM binds its ZeroMQ sockets as files in ``$VLLM_RPC_BASE_PATH``
(the temp folder by default) and leaves them there when it is stopped; the watchdog gives each engine a
folder of its own and removes it once the engine is gone. The engine here is a Python process that binds
a Unix socket where vLLM would, as vLLM's ``get_open_zmq_ipc_path`` names it (``{base}/{uuid4}``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eagle3_core.serve.process import start_engine, stop_engine

BINDS = """
import os, socket, sys, time, uuid
path = os.path.join(os.environ["VLLM_RPC_BASE_PATH"], str(uuid.uuid4()))
socket.socket(socket.AF_UNIX).bind(path)
print(path, flush=True)
time.sleep(float(sys.argv[1]))
"""


def started(seconds: float, **popen) -> tuple[subprocess.Popen, Path]:
    proc = start_engine([sys.executable, "-c", BINDS, str(seconds)], stdout=subprocess.PIPE, text=True, **popen)
    return proc, Path(proc.stdout.readline().strip())


def test_a_stopped_engine_leaves_no_socket_file_and_no_folder():
    proc, bound = started(60)
    assert bound.is_socket() and bound.parent.name.startswith("eagle3-ipc-"), bound
    stop_engine(proc)
    assert not bound.parent.exists(), sorted(bound.parent.iterdir())


def test_an_engine_that_exits_on_its_own_leaves_no_folder():
    proc, bound = started(0)
    assert proc.wait(timeout=30) == 0
    deadline = time.monotonic() + 5
    while bound.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not bound.parent.exists()


def test_a_folder_the_environment_names_is_the_users_and_stays():
    # short: a Unix socket's path holds at most 107 bytes, and a worker's tmp_path leaves no room for a uuid
    users = Path(tempfile.mkdtemp(prefix="e3-ipc-"))
    try:
        proc, bound = started(60, env={**os.environ, "VLLM_RPC_BASE_PATH": str(users)})
        assert bound.parent == users
        stop_engine(proc)
        assert users.is_dir()
    finally:
        shutil.rmtree(users)
