"""Real vLLM engines die with the process that started them, SIGKILL included: `eagle3 evaluate`'s
server, and the online-training extraction engine. Each starter is SIGKILLed (nothing in it runs
after), and every process of the engine's group must be gone: vLLM's api_server, EngineCore and
Worker held 2 GB each time before (on a GPU host, the device memory the rerun needed)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fixtures.requirements import require_vllm
from tests.fixtures.vllm import machine_vllm_lock
from tests.processes import alive, group

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": "1"}

ONLINE_STARTER = """
import sys, time
from eagle3_core.target.config import TargetConfig
from eagle3_core.stages.train.config import OnlineVllmConfig
from eagle3_core.stages.train.online_engine import build_engine
cfg = OnlineVllmConfig(engine="vllm", vllm_kv_cache_bytes=64 << 20)
engine = build_engine(cfg, TargetConfig(path=sys.argv[1]), [1, 2, 3], 6, 64, sys.argv[2])
print(engine.proc.pid, flush=True)
time.sleep(600)
"""


def vllm_watchdog_of(starter: int) -> int | None:
    """The watchdog of the starter's vLLM engine: the CLI's ephemeral Prefect API runs under a
    watchdog of the same starter too, so the engine's is the one running vLLM's api_server module
    (matched by module, not by "vllm" anywhere: a checkout's own path may hold that word)."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        is_watchdog = len(argv) > 2 and argv[1].endswith(b"watchdog.py") and argv[2] == str(starter).encode()
        if is_watchdog and any(arg.startswith(b"vllm.entrypoints") for arg in argv[3:]):
            return int(entry)
    return None


def wait_until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def healthy(log_dir: Path) -> bool:
    logs = list(log_dir.glob("vllm-*.log"))
    if not logs:
        return False
    port = logs[0].stem.split("-")[1]
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def sigkill_and_find_left(starter: subprocess.Popen, engine: list[int]) -> list[int]:
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 60  # SIGTERM, then SIGKILL after the watchdog's 10 s grace
    while any(map(alive, engine)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return [pid for pid in engine if alive(pid)]


def test_a_sigkilled_evaluate_leaves_no_vllm_process_and_its_log_is_in_the_run(tmp_path, toy_target):
    from tests.stages.evaluate.models import make_export

    require_vllm()
    target = toy_target  # a served model of the toy recipe's size (max_model_len 2048, evaluate's default)
    export = make_export(tmp_path / "drafter" / "export", target)
    out = tmp_path / "eval"
    command = ["-c", "from flows.cli import main; main()", "evaluate", "--target", str(target), "--drafter"]
    command += [str(export), "--out", str(out), "--online-only", "--no-baseline", "--max-samples", "2"]
    with machine_vllm_lock():
        starter = subprocess.Popen([sys.executable, *command], env=ENV, cwd=tmp_path, start_new_session=True)
        try:
            watchdog = wait_until(lambda: vllm_watchdog_of(starter.pid), 300, "evaluate to start vLLM")
            wait_until(lambda: starter.poll() is not None or healthy(out / "logs"), 300, "vLLM to answer /health")
            assert starter.poll() is None, "evaluate stopped before vLLM was up"
            engine = group(watchdog)
            assert len(engine) >= 3  # the watchdog, the api_server and vLLM's engine processes

            assert sigkill_and_find_left(starter, engine) == []
        finally:
            if starter.poll() is None:
                os.killpg(starter.pid, signal.SIGKILL)


def test_a_sigkilled_trainer_leaves_no_online_extraction_engine(tmp_path):
    from eagle3_core.serve.one_process import computes_in_one_thread
    from tests.stages.extract.helpers import build_tiny_llama

    require_vllm()
    target = build_tiny_llama(tmp_path / "target", layers=6)
    with machine_vllm_lock():
        starter = subprocess.Popen(
            [sys.executable, "-c", ONLINE_STARTER, str(target), str(tmp_path / "drafter" / "engine")],
            env=ENV,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            watchdog = int(starter.stdout.readline())  # printed once the engine is loaded
            engine = group(watchdog)
            # the watchdog and the worker, with vLLM's engine in it on a CPU computing in one thread
            # (serve/one_process.py), else beside it
            processes = 2 if computes_in_one_thread() else 3
            assert len(engine) >= processes and (tmp_path / "drafter" / "engine" / "worker.log").exists()

            assert sigkill_and_find_left(starter, engine) == []
        finally:
            starter.kill()
