"""A command run without PREFECT_API_URL starts Prefect's ephemeral API; killed with SIGKILL, it
must take that API with it. Before, the API (uvicorn, its SQLite database and its port) went on
serving for good, one more for every killed run."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import alive, environ
from tests.stages.generate.helpers import prompts, write_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EAGLE3 = str(Path(sys.executable).with_name("eagle3"))
# Prefect's own factory, or the command's (tasks/ephemeral_api.py: Prefect's app with the lease sweep)
API_APPS = (b"prefect.server.api.server:create_app", b"tasks.ephemeral_api:create_app")


def ephemeral_apis(home: Path) -> set[int]:
    """The live Prefect ephemeral API processes of the command run with PREFECT_HOME ``home`` (another
    xdist worker's run may have an API of its own)."""
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            ours = environ(int(entry)).get("PREFECT_HOME") == str(home)
            if any(app in cmdline for app in API_APPS) and ours and alive(int(entry)):
                found.add(int(entry))
        except OSError:
            continue
    return found


def test_a_killed_command_takes_its_ephemeral_prefect_api_with_it(tmp_path, make_fake_server):
    server = make_fake_server()
    server.inject("stall", times=None, after=1)  # the probe is answered, then every prompt stalls
    src = write_jsonl(tmp_path / "in.jsonl", prompts(4))
    args = [EAGLE3, "generate", "--input", str(src), "--base-url", server.url, "--out", str(tmp_path / "out")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")} | {
        "PREFECT_HOME": str(tmp_path / "prefect-home"),  # its own database, no profile's server
        "PREFECT_PROFILES_PATH": str(tmp_path / "profiles.toml"),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",  # a new database migrates first: >20 s here
    }
    home = Path(env["PREFECT_HOME"])
    before = ephemeral_apis(home)
    run = subprocess.Popen([*args, "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline, started = time.monotonic() + 120, set()
    while not (started := ephemeral_apis(home) - before) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert started, f"no ephemeral API started (exit {run.poll()}): {run.stderr.read1().decode()[-2000:]}"
    while server.received < 2 and time.monotonic() < deadline:  # the flow is mid-run, so is its API
        time.sleep(0.2)
    assert run.poll() is None, run.stderr.read().decode()[-3000:]

    run.send_signal(signal.SIGKILL)
    run.wait()

    deadline = time.monotonic() + 20  # the watchdog's SIGTERM, then its SIGKILL after 10 s
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in started if alive(pid)], "the ephemeral Prefect API outlived its killed command"
