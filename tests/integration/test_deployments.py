"""The deployments as a user runs them: a real `prefect server`, deployments/serve.py, and
`prefect deployment run` on the toy recipe.

The recipe is configs/toy.yaml on 48 prompts (8 held out), every stage; the toy target comes from its cache (the `toy_target` fixture builds it once per machine),
and the machine's vLLM lock is held while the flow run serves it.
"""

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from eagle3_core.stages import BY_NAME, STAGE_NAMES
from tests.fixtures.prefect_server import running_prefect_server
from tests.processes import start_session, stop_session

pytestmark = [pytest.mark.slow, pytest.mark.prefect_server]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOY_RECIPE = ROOT / "configs" / "toy.yaml"


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return start_session(args, env, log, cwd=ROOT)


stop = stop_session


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
    with running_prefect_server(tmp_path_factory.mktemp("prefect-home"), PREFECT_LOGGING_LEVEL="INFO") as env:
        yield env


def recipe_for_test(tmp_path: Path, toy_dir: Path) -> Path:
    """The toy recipe on a few prompts, every stage."""
    from eagle3_core.toy.build import HELDOUT_PROMPTS, TRAIN_PROMPTS

    data = yaml.safe_load(TOY_RECIPE.read_text())
    data["stages"] = list(STAGE_NAMES)
    data["generate"]["prompts"] = {"input": str(toy_dir / TRAIN_PROMPTS), "max_samples": 48}
    data.setdefault("evaluate", {})["prompts"] = {"input": str(toy_dir / HELDOUT_PROMPTS), "max_samples": 8}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_served_pipeline_deployment_runs_to_completion_and_nightly_is_scheduled(prefect_server, toy_target, tmp_path):
    from tests.fixtures.vllm import machine_vllm_lock

    env, out = prefect_server, tmp_path / "served"
    recipe = recipe_for_test(tmp_path, toy_target)
    log = tmp_path / "serve.log"
    # The flow run starts vLLM: hold the machine's lock so no other session runs one meanwhile.
    with machine_vllm_lock():
        serve = start(
            [sys.executable, str(ROOT / "deployments" / "serve.py"), "--recipe", str(recipe), "--out", str(out)],
            env,
            log,
        )
        try:
            wait_for(lambda: "eagle3-nightly" in log.read_text(), 120, "serve.py to register the deployments", log)
            run = run_deployment(env, "pipeline/eagle3-pipeline")
            artifacts = _artifacts(env, _flow_run_id(run.stdout))
            first = _manifest_times(out, recipe)
            again = run_deployment(env, "pipeline/eagle3-pipeline")  # everything done: nothing runs again
            nightly = _deployment(env, "nightly/eagle3-nightly")
        finally:
            stop(serve)  # the serve process before the server (the fixture stops the server)
    assert run.returncode == 0 and "Completed" in run.stdout, run.stdout + run.stderr + log.read_text()[-5000:]
    assert "pipeline-summary" in artifacts
    for stage in yaml.safe_load(recipe.read_text())["stages"]:
        assert _manifest_status(out, stage) == "complete", stage
    assert again.returncode == 0 and "Completed" in again.stdout, again.stdout + again.stderr
    assert _manifest_times(out, recipe) == first  # every stage reused its outputs
    schedule = nightly["schedules"][0]["schedule"]
    assert (schedule["cron"], schedule["timezone"]) == ("0 2 * * *", "UTC")
    assert nightly["global_concurrency_limit"]["limit"] == 1


def run_deployment(env: dict, name: str) -> subprocess.CompletedProcess:
    """`prefect deployment run NAME --watch`: returns once the flow run is final."""
    return subprocess.run(
        [str(BIN / "prefect"), "deployment", "run", name, "--watch", "--watch-timeout", "1200"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1260,
    )


def _manifest_times(out: Path, recipe: Path) -> dict[str, float | None]:
    from eagle3_core.run.layout import RunLayout
    from eagle3_core.run.manifest import read_manifest

    manifests = {
        s: read_manifest(getattr(RunLayout(root=out), BY_NAME[s].folder))
        for s in yaml.safe_load(recipe.read_text())["stages"]
    }
    return {s: m.updated_at if m else None for s, m in manifests.items()}


def _flow_run_id(output: str) -> str:
    return re.search(r"UUID: ([0-9a-f-]{36})", output).group(1)


def _manifest_status(out: Path, stage: str) -> str | None:
    from eagle3_core.run.layout import RunLayout
    from eagle3_core.run.manifest import read_manifest

    manifest = read_manifest(getattr(RunLayout(root=out), BY_NAME[stage].folder))
    return manifest.status if manifest else None


def _artifacts(env: dict, flow_run_id: str) -> set[str]:
    body = {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}}
    response = httpx.post(f"{env['PREFECT_API_URL']}/artifacts/filter", json=body, timeout=10)
    response.raise_for_status()
    return {a["key"] for a in response.json() if a["key"]}


def _deployment(env: dict, name: str) -> dict:
    response = httpx.get(f"{env['PREFECT_API_URL']}/deployments/name/{name}", timeout=10)
    response.raise_for_status()
    return response.json()
