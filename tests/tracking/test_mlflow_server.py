"""A run sent to a real ``mlflow server`` over HTTP, as a team's tracking server takes it: the
trainer's tracker (rank 0's, without DeepSpeed) killed and resumed into the same MLflow run with
each step once, evaluate's figures added to it, all read back through MLflow's client; a server
that is not there, or goes away mid-run, is one warning line and the run goes on."""

import json
import socket

import pytest

from eagle3_core.contracts.evaluation import EvaluationReport
from eagle3_core.stages.evaluate.tracking import log_evaluation
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.tracking import start_tracker
from eagle3_core.tracking import RunSpec, Tracker
from tests.fixtures.mlflow_server import running_mlflow_server, stop
from tests.tracking.records import tensorboard_scalars

pytestmark = pytest.mark.slow
FACTS = {"recipe_hash": "abc123", "eagle3_version": "0.1.0", "mode": "offline"}


@pytest.fixture(autouse=True)
def no_tracking_env(monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory):
    with running_mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as (uri, _):
        yield uri


def write_metrics(path, steps):
    lines = [{"step": s, "split": "train", "loss": float(s), "acc_k": [0.5], "lr": 0.003} for s in steps]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_killed_run_resumes_into_the_same_run_on_the_server_and_evaluate_adds_to_it(mlflow_uri, tmp_path):
    from mlflow.tracking import MlflowClient

    out = tmp_path / "drafter"
    out.mkdir()
    cfg = TrainConfig(lr=0.003, report_to=["mlflow"], tracking={"mlflow_tracking_uri": mlflow_uri, "project": "team"})
    metrics = out / "metrics.jsonl"
    write_metrics(metrics, range(1, 6))
    killed = start_tracker(cfg, FACTS, metrics, 0, None)
    for step in range(1, 6):  # steps 4 and 5 reach the server, then the trainer is killed
        killed.log({"train/loss": float(step)}, step)
    client_state = {"step": 3, "tracking": killed.ids()}
    killed.close(failed=True)
    write_metrics(metrics, range(1, 4))  # the resume cuts metrics.jsonl at the checkpoint
    resumed = start_tracker(cfg, FACTS, metrics, 0, client_state)
    for step in (6, 7):
        resumed.log({"train/loss": 100.0 + step}, step)
    ids = resumed.ids()
    resumed.close()
    log_evaluation(out, EvaluationReport.of({"online": {"with_drafter": {"acceptance_length": 2.5}}}), print)

    assert ids == client_state["tracking"] and ids["mlflow"]["tracking_uri"] == mlflow_uri
    client = MlflowClient(tracking_uri=mlflow_uri)
    run = client.get_run(ids["mlflow"]["run_id"])
    assert client.get_experiment(run.info.experiment_id).name == "team" and run.info.status == "FINISHED"
    assert run.data.params["run.recipe_hash"] == "abc123" and run.data.params["train.lr"] == "0.003"
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss"))
    assert history == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 5.0), (6, 106.0), (7, 107.0)]
    assert run.data.metrics["vllm_eval/acceptance_length"] == 2.5
    assert [a.path for a in client.list_artifacts(run.info.run_id, "vllm_eval")] == ["vllm_eval/report.md"]
    assert len(client.search_runs([run.info.experiment_id])) == 1  # one run, not one per segment


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.timeout(60)  # MLflow's own retries would hold the start about 4 minutes
def test_an_unreachable_tracking_uri_is_one_warning_and_the_others_go_on(tmp_path):
    lines = []
    spec = RunSpec(tmp_path, mlflow_tracking_uri=f"http://127.0.0.1:{closed_port()}")
    tracker = Tracker.start(["mlflow", "tensorboard"], spec, lines.append)
    tracker.log({"train/loss": 1.0}, 1)
    tracker.close()
    assert [b.name for b in tracker.backends] == [] and len(lines) == 1
    assert lines[0].startswith("mlflow failed to start (ConnectionError: the MLflow server http://127.0.0.1:")
    assert tensorboard_scalars(tmp_path / "tensorboard")["train/loss"] == [(1, 1.0)]


@pytest.mark.timeout(120)
def test_a_server_lost_mid_run_is_one_warning_and_the_run_goes_on(tmp_path):
    lines = []
    with running_mlflow_server(tmp_path / "server") as (uri, server):
        tracker = Tracker.start(["mlflow", "tensorboard"], RunSpec(tmp_path, mlflow_tracking_uri=uri), lines.append)
        tracker.log({"train/loss": 1.0}, 1)
        stop(server)
        for step in (2, 3):
            tracker.log({"train/loss": float(step)}, step)
        tracker.close()
    assert [b.name for b in tracker.backends] == [] and len(lines) == 1
    assert lines[0].startswith("mlflow failed to write (")
    assert [s for s, _ in tensorboard_scalars(tmp_path / "tensorboard")["train/loss"]] == [1, 2, 3]
