"""The deployments as a user runs them: a real `prefect server`, deployments/serve.py serving every
deployment deployments/prefect.yaml defines for the process pool, and each run started from the
deployment's form as the UI starts it (`create_flow_run` with the form's values: the stored parameters,
every default filled in, tests/flows/forms.py), executed by serve.py's runner.

One server and one serve.py for the module. The recipe is configs/toy.yaml on 48 prompts (8 held out),
every stage: what the pipeline and the nightly run; the generate deployment runs prefect.yaml's own
parameters (serve.py keeps them for a recipe that asks the pipeline's `serve:` for generate). The toy
target comes from its cache (the `toy_target` fixture builds it once per machine), and the machine's
vLLM lock is held while a run serves it. The pipeline runs once (the end-to-end test and the form
test read the same run). The `-docker` variants need Docker and its work pool: they carry the same
entrypoints and parameters (tests/flows/test_deployment_files.py), and are not run here.
"""

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from deployments.serve import defined_deployments
from eagle3_core.stages import BY_NAME, STAGE_NAMES
from tests.fixtures.prefect_server import running_prefect_server
from tests.flows.forms import filled_form
from tests.processes import start_session, stop_session

pytestmark = [pytest.mark.slow, pytest.mark.prefect_server]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOY_RECIPE = ROOT / "configs" / "toy.yaml"
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


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


@dataclass
class Served:
    env: dict
    out: Path
    recipe: Path
    log: Path

    @property
    def base(self) -> str:
        return self.env["PREFECT_API_URL"]


@pytest.fixture(scope="module")
def served(tmp_path_factory, toy_target):
    """A real server, serve.py serving every deployment on the test's recipe into ``out``."""
    tmp = tmp_path_factory.mktemp("served")
    recipe, out, log = recipe_for_test(tmp, toy_target), tmp / "out", tmp / "serve.log"
    (tmp / "home").mkdir()
    with running_prefect_server(tmp / "home", PREFECT_LOGGING_LEVEL="INFO") as env:
        serve = start(
            [sys.executable, str(ROOT / "deployments" / "serve.py"), "--recipe", str(recipe), "--out", str(out)],
            env,
            log,
        )
        try:
            wait_for(lambda: "eagle3-nightly" in log.read_text(), 180, "serve.py to register the deployments", log)
            yield Served(env, out, recipe, log)
        finally:
            stop(serve)  # the serve process before the server


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


def api(base: str, method: str, path: str, **body):
    """One call to the server's REST API, as the UI makes it. A 503 is the server's own "busy" (its
    SQLite database, under a loaded CI machine) and is asked again, as the UI and Prefect's client do."""
    for attempt in range(6):
        response = httpx.request(method, f"{base}{path}", json=body or None, timeout=30)
        if response.status_code != 503:
            break
        time.sleep(0.5 * 2**attempt)
    response.raise_for_status()
    return response.json()


def deployment_named(base: str, name: str) -> dict:
    (found,) = api(base, "POST", "/deployments/filter", deployments={"name": {"any_": [name]}})
    return found


def submit(base: str, name: str, edit=None) -> dict:
    """Submit the deployment's form (with ``edit`` applied) and return the run once it is final."""
    from tests.fixtures.vllm import machine_vllm_lock

    deployment = deployment_named(base, name)
    form = filled_form(deployment["parameter_openapi_schema"], deployment["parameters"])
    if edit:
        edit(form)
    with machine_vllm_lock():  # the pipeline's and the nightly's `serve:` start vLLM for the toy
        run = api(base, "POST", f"/deployments/{deployment['id']}/create_flow_run", parameters=form)
        deadline = time.monotonic() + 900
        while (run := api(base, "GET", f"/flow_runs/{run['id']}"))["state_type"] not in FINAL:
            assert time.monotonic() < deadline, f"{name} did not finish"
            time.sleep(1)
    return run


@pytest.fixture(scope="module")
def pipeline_run(served) -> dict:
    """The pipeline deployment's form, nothing edited: the whole DAG, once for the module."""
    return submit(served.base, "eagle3-pipeline")


@pytest.mark.parametrize("name", [d["name"] for d in defined_deployments()])
def test_each_deployment_runs_to_completion_from_its_form_with_nothing_edited(served, request, name):
    run = request.getfixturevalue("pipeline_run") if name == "eagle3-pipeline" else submit(served.base, name)

    assert run["state_type"] == "COMPLETED", f"{name}: {run['state']['message']}\n{served.log.read_text()[-5000:]}"
    if name == "eagle3-generate":  # prefect.yaml's parameters: the toy's 1,000 prompts, their own answers
        manifest = read_manifest(served.out / "generate" / "generations")
        assert manifest.status == "complete" and manifest.counts["accepted"] == 1000
    if name == "eagle3-nightly":
        (version,) = (served.out / "nightly" / "versions").iterdir()
        assert read_manifest(version / "generations").counts["accepted"] > 0
        assert "nightly-summary" in _artifacts(served.env, run["id"])


def test_served_pipeline_deployment_runs_to_completion_and_nightly_is_scheduled(served, pipeline_run):
    env, out, recipe = served.env, served.out, served.recipe
    artifacts = _artifacts(env, pipeline_run["id"])
    first = _manifest_times(out, recipe)
    again = run_deployment(env, "pipeline/eagle3-pipeline")  # everything done: nothing runs again
    nightly = _deployment(env, "nightly/eagle3-nightly")

    assert pipeline_run["state_type"] == "COMPLETED", pipeline_run["state"]["message"]
    assert "pipeline-summary" in artifacts
    for stage in yaml.safe_load(recipe.read_text())["stages"]:
        assert _manifest_status(out, stage) == "complete", stage
    assert again.returncode == 0 and "Completed" in again.stdout, again.stdout + again.stderr
    assert _manifest_times(out, recipe) == first  # every stage reused its outputs
    schedule = nightly["schedules"][0]["schedule"]
    assert (schedule["cron"], schedule["timezone"]) == ("0 2 * * *", "UTC")
    assert nightly["global_concurrency_limit"]["limit"] == 1


def test_a_failed_run_shows_its_one_line_error_and_no_traceback(served):
    """The run's page: the state's message is the error's one line (not `Flow run encountered an
    exception: InputError: ...` with its fix), and the run's logs say it once, fix included, with no
    traceback (Prefect logged three: the task's, the flow's, the engine's)."""
    missing = served.out / "no-such-prompts.jsonl"

    def elsewhere(form):
        form["cfg"]["prompts"]["input"] = str(missing)
        form["out_dir"] = str(served.out / "generate-missing")

    run = submit(served.base, "eagle3-generate", elsewhere)

    assert run["state_type"] == "FAILED"
    assert run["state"]["message"] == f"input not found: {missing}"
    logs = wait_for(lambda: _finished_logs(served.base, run), 60, "the run's logs", served.log)
    assert not [line for line in logs if "Traceback" in line], "\n".join(logs)
    assert [line for line in logs if line.startswith(f"error: input not found: {missing}\n  fix: ")], logs


def test_a_real_conflict_in_the_form_fails_the_run_in_one_line_naming_both_fields_and_leaves_the_summary(served):
    def conflict(form):  # training on earlier turns the template says it strips of their reasoning
        form["config"]["target"]["history_reasoning"] = "drop"
        form["config"]["target"]["history_supervised"] = True

    run = submit(served.base, "eagle3-pipeline", conflict)

    assert run["state_type"] == "FAILED"
    line = next(line for line in run["state"]["message"].splitlines() if "history_supervised" in line)
    assert "target.history_reasoning: drop" in line
    assert "refused: invalid config: target" in _summary(served.base, run)


def test_generates_copy_of_target_chat_is_no_parameter_the_server_takes(served):
    """The form has no generate.chat (a copy of target.chat the run ignores): one sent through the API
    anyway is refused by the server's own schema check, before any run."""
    deployment = deployment_named(served.base, "eagle3-pipeline")
    form = filled_form(deployment["parameter_openapi_schema"], deployment["parameters"])
    form["config"]["generate"]["chat"] = {"skip_special_tokens": False, "spaces_between_special_tokens": True}

    with pytest.raises(httpx.HTTPStatusError) as refused:
        api(served.base, "POST", f"/deployments/{deployment['id']}/create_flow_run", parameters=form)

    assert refused.value.response.status_code == 409 and "chat" in refused.value.response.text


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


def read_manifest(folder: Path):
    from eagle3_core.run.manifest import read_manifest as read

    return read(folder)


def _finished_logs(base: str, run: dict) -> list[str]:
    """The run's log lines (its tasks' too) once the flow's last, its final state, has reached the API."""
    logs = api(base, "POST", "/logs/filter", logs={"flow_run_id": {"any_": [run["id"]]}}, limit=200)
    lines = [log["message"] for log in logs]
    finished = [line for line in lines if line.startswith("Finished in state Failed")]
    return lines if len(finished) >= 2 else []  # the task's and the flow's


def _manifest_times(out: Path, recipe: Path) -> dict[str, float | None]:
    from eagle3_core.run.layout import RunLayout

    manifests = {
        s: read_manifest(getattr(RunLayout(root=out), BY_NAME[s].folder))
        for s in yaml.safe_load(recipe.read_text())["stages"]
    }
    return {s: m.updated_at if m else None for s, m in manifests.items()}


def _manifest_status(out: Path, stage: str) -> str | None:
    from eagle3_core.run.layout import RunLayout

    manifest = read_manifest(getattr(RunLayout(root=out), BY_NAME[stage].folder))
    return manifest.status if manifest else None


def _artifacts(env: dict, flow_run_id: str) -> set[str]:
    body = {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}}
    response = httpx.post(f"{env['PREFECT_API_URL']}/artifacts/filter", json=body, timeout=10)
    response.raise_for_status()
    return {a["key"] for a in response.json() if a["key"]}


def _summary(base: str, run: dict) -> str:
    found = api(base, "POST", "/artifacts/filter", artifacts={"flow_run_id": {"any_": [run["id"]]}})
    return next(a["data"] for a in found if a["key"] == "pipeline-summary")


def _deployment(env: dict, name: str) -> dict:
    response = httpx.get(f"{env['PREFECT_API_URL']}/deployments/name/{name}", timeout=10)
    response.raise_for_status()
    return response.json()
