"""The deployments run from their Prefect UI forms on a real `prefect server`: the parameters the
form sends (the stored ones with every schema default filled in, tests/flows/forms.py) start a
run of each deployment, which fails, if it fails, for its own reason, never over a parameter.

The served recipe is configs/toy.yaml without `serve:` and with `stages: [vocab]`, so each run
stops at its first real step (vocab blocked, no endpoint for generate and the nightly) without
starting vLLM; what is under test is that the form's parameters get that far.
"""

import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.fixtures.prefect_server import running_prefect_server
from tests.flows.forms import filled_form
from tests.integration.test_deployments import start, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.prefect_server]

ROOT = Path(__file__).resolve().parents[2]
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@pytest.fixture(scope="module")
def served(tmp_path_factory, toy_target):
    """A real server with deployments/serve.py serving every deployment; yields (api, out)."""
    tmp = tmp_path_factory.mktemp("forms")
    recipe = yaml.safe_load((ROOT / "configs" / "toy.yaml").read_text())
    recipe.pop("serve", None)
    recipe["stages"] = ["vocab"]
    (tmp / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    (tmp / "home").mkdir()
    with running_prefect_server(tmp / "home", PREFECT_LOGGING_LEVEL="INFO") as env:
        log = tmp / "serve.log"
        serve = start(
            [
                sys.executable,
                str(ROOT / "deployments" / "serve.py"),
                "--recipe",
                str(tmp / "recipe.yaml"),
                "--out",
                str(tmp / "out"),
            ],
            env,
            log,
        )
        try:
            wait_for(lambda: "eagle3-nightly" in log.read_text(), 180, "serve.py to register the deployments", log)
            yield env["PREFECT_API_URL"], log
        finally:
            stop(serve)


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


def submit(base: str, name: str, edit=None) -> dict:
    """Submit the deployment's form (with ``edit`` applied) and return the run once it is final."""
    deployment = api(base, "GET", f"/deployments/name/{name}")
    form = filled_form(deployment["parameter_openapi_schema"], deployment["parameters"])
    if edit:
        edit(form)
    run = api(base, "POST", f"/deployments/{deployment['id']}/create_flow_run", parameters=form)
    deadline = time.monotonic() + 600
    while (run := api(base, "GET", f"/flow_runs/{run['id']}"))["state_type"] not in FINAL:
        assert time.monotonic() < deadline, f"{name} did not finish"
        time.sleep(1)
    return run


def states(base: str, run: dict) -> list[str]:
    return [s["type"] for s in api(base, "GET", f"/flow_run_states/?flow_run_id={run['id']}")]


def summary(base: str, run: dict) -> str:
    found = api(base, "POST", "/artifacts/filter", artifacts={"flow_run_id": {"any_": [run["id"]]}})
    return next(a["data"] for a in found if a["key"] == "pipeline-summary")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("pipeline/eagle3-pipeline", "1 selected stage(s) did not run: vocab needs reconstruct"),
        ("generate/eagle3-generate", "generate needs at least one endpoint"),
        ("nightly/eagle3-nightly", "endpoint"),
    ],
)
def test_each_deployments_form_with_nothing_edited_starts_a_run_that_stops_for_its_own_reason(served, name, reason):
    base, log = served
    run = submit(base, name)

    message = run["state"]["message"] or ""
    assert "RUNNING" in states(base, run), message + log.read_text()[-3000:]
    assert "invalid parameters" not in message and "ParameterTypeError" not in message
    assert reason in message, message
    assert "--base-url" not in message.split("fix:")[0] and "pass --base-url" not in message
    if name.startswith("pipeline/"):
        assert "failed: 1 selected stage(s) did not run" in summary(base, run)


def test_a_real_conflict_in_the_form_fails_the_run_in_one_line_naming_both_fields_and_leaves_the_summary(served):
    base, _ = served

    def conflict(form):  # training on earlier turns the template says it strips of their reasoning
        form["config"]["target"]["history_reasoning"] = "drop"
        form["config"]["target"]["history_supervised"] = True

    run = submit(base, "pipeline/eagle3-pipeline", conflict)

    assert run["state_type"] == "FAILED"
    line = next(line for line in run["state"]["message"].splitlines() if "history_supervised" in line)
    assert "target.history_reasoning: drop" in line
    assert "refused: invalid config: target" in summary(base, run)


def test_generates_copy_of_target_chat_is_no_parameter_the_server_takes(served):
    """The form has no generate.chat (a copy of target.chat the run ignores): one sent through the API
    anyway is refused by the server's own schema check, before any run."""
    base, _ = served
    deployment = api(base, "GET", "/deployments/name/pipeline/eagle3-pipeline")
    form = filled_form(deployment["parameter_openapi_schema"], deployment["parameters"])
    form["config"]["generate"]["chat"] = {"skip_special_tokens": False, "spaces_between_special_tokens": True}

    with pytest.raises(httpx.HTTPStatusError) as refused:
        api(base, "POST", f"/deployments/{deployment['id']}/create_flow_run", parameters=form)

    assert refused.value.response.status_code == 409 and "chat" in refused.value.response.text
