"""The deployments as a user runs them: a real `prefect server`, deployments/serve.py, and
`prefect deployment run` on the toy recipe.

Stages not built yet are left out of the recipe (the pipeline would report them `not built`);
the toy target comes from its cache (the `toy_target` fixture builds it once per machine).
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from flows.pipeline_stages import STAGES, load_stage_flow

pytestmark = [pytest.mark.slow, pytest.mark.prefect_server]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOY_RECIPE = ROOT / "configs" / "toy.yaml"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """A child in its own session, so stopping it stops everything it started."""
    return subprocess.Popen(args, env=env, cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_for(predicate, timeout: float, what: str, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}; log:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """`prefect server start` on loopback with its own PREFECT_HOME; yields the env that points at it."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "INFO"}
    log = home / "server.log"
    server = start([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, log)
    try:
        wait_for(lambda: _healthy(env["PREFECT_API_URL"]), 120, "the Prefect server", log)
        yield env
    finally:
        stop(server)


def _healthy(api: str) -> bool:
    try:
        return httpx.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def recipe_with_built_stages(tmp_path: Path) -> Path:
    """The toy recipe limited to the stages in the code base (all of them once every stage lands)."""
    data = yaml.safe_load(TOY_RECIPE.read_text()) if TOY_RECIPE.exists() else {}
    data["stages"] = [name for name in STAGES if load_stage_flow(name) is not None]
    if not TOY_RECIPE.exists():
        data["stages"] = [s for s in data["stages"] if s != "generate"]  # no endpoint without the toy recipe
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_served_pipeline_deployment_runs_to_completion_and_nightly_is_scheduled(prefect_server, tmp_path):
    env, out = prefect_server, tmp_path / "served"
    log = tmp_path / "serve.log"
    serve = start([sys.executable, str(ROOT / "deployments" / "serve.py"),
                   "--recipe", str(recipe_with_built_stages(tmp_path)), "--out", str(out)], env, log)
    try:
        wait_for(lambda: "eagle3-nightly" in log.read_text(), 120, "serve.py to register the deployments", log)
        run = subprocess.run([str(BIN / "prefect"), "deployment", "run", "pipeline/eagle3-pipeline", "--watch",
                              "--watch-timeout", "900"], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=960)
        assert run.returncode == 0, run.stdout + run.stderr + log.read_text()[-3000:]
        flow_run_id = re.search(r"UUID: ([0-9a-f-]{36})", run.stdout).group(1)
        assert "Completed" in run.stdout
        artifacts = _artifacts(env, flow_run_id)
        assert "pipeline-summary" in artifacts
        nightly = _deployment(env, "nightly/eagle3-nightly")
    finally:
        stop(serve)  # the serve process before the server (the fixture stops the server)
    schedule = nightly["schedules"][0]["schedule"]
    assert (schedule["cron"], schedule["timezone"]) == ("0 2 * * *", "UTC")
    assert nightly["concurrency_limit"] == 1 or nightly["global_concurrency_limit"]["limit"] == 1


def _artifacts(env: dict, flow_run_id: str) -> set[str]:
    body = {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}}
    response = httpx.post(f"{env['PREFECT_API_URL']}/artifacts/filter", json=body, timeout=10)
    response.raise_for_status()
    return {a["key"] for a in response.json() if a["key"]}


def _deployment(env: dict, name: str) -> dict:
    response = httpx.get(f"{env['PREFECT_API_URL']}/deployments/name/{name}", timeout=10)
    response.raise_for_status()
    return response.json()
