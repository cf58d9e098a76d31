"""The tracking backends with their real packages: what a run writes, read back by each tool's own
reader; a resumed run continues the same run with no step twice; a failing backend never stops one."""

import subprocess
import sys
import time

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.tracking import RunSpec, Tracker, check_backends, flatten, reopen, write_run_file
from eagle3_core.tracking.backends import wandb_mode
from tests.tracking.records import tensorboard_scalars, tensorboard_texts, wandb_runs


@pytest.fixture(autouse=True)
def no_wandb_account(monkeypatch, tmp_path):
    """No key, no netrc, no WANDB_MODE: W&B must choose offline by itself."""
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NETRC", str(tmp_path / "home" / "no-netrc"))


def log_steps(tracker: Tracker, steps, value: float) -> None:
    for step in steps:
        tracker.log({"train/loss": value + step, "train/acc_k/0": 0.5}, step)


def first_segment_then_resume(names, out, first=range(1, 6), resume_step=3, then=range(4, 8)):
    """A run sends steps 1-5 and is killed; its checkpoint was at step 3; the resumed run sends
    metrics.jsonl again up to the checkpoint (steps 1-3, as the trainer does), then steps 4-7."""
    lines = []
    spec = RunSpec(out, params={"train": {"lr": 0.003}, "run": {"recipe_hash": "abc"}})
    killed = Tracker.start(names, spec, lines.append)
    log_steps(killed, first, 0.0)
    ids = killed.ids()
    killed.close(failed=True)
    # the resumed run is another process, started later: its event file's name (whole seconds, then pid and a
    # per-process counter) sorts after the killed run's; two writers of one process within one second sort
    # by that counter as text ("10" before "9"), which no real resume meets
    time.sleep(1.01 - time.time() % 1)
    resumed_spec = RunSpec(out, params=spec.params, resume_step=resume_step, ids=ids)
    resumed = Tracker.start(names, resumed_spec, lines.append)
    log_steps(resumed, range(1, resume_step + 1), 0.0)
    log_steps(resumed, then, 100.0)
    resumed_ids = resumed.ids()
    resumed.close()
    return ids, resumed_ids, lines


def test_tensorboard_reads_back_one_value_a_step_the_resumed_runs_past_the_checkpoint(tmp_path):
    _, _, lines = first_segment_then_resume(["tensorboard"], tmp_path)
    assert lines == []
    scalars = tensorboard_scalars(tmp_path / "tensorboard")
    # steps 4 and 5 of the killed run are purged (purge_step = checkpoint + 1): the resumed run's stand
    assert scalars["train/loss"] == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 104.0), (5, 105.0), (6, 106.0), (7, 107.0)]
    assert '"recipe_hash": "abc"' in tensorboard_texts(tmp_path / "tensorboard")["run/params/text_summary"]


def test_a_fresh_run_replaces_the_old_event_files(tmp_path):
    first_segment_then_resume(["tensorboard"], tmp_path)
    fresh = Tracker.start(["tensorboard"], RunSpec(tmp_path))
    log_steps(fresh, [1], 7.0)
    fresh.close()
    assert tensorboard_scalars(tmp_path / "tensorboard")["train/loss"] == [(1, 8.0)]


def test_wandb_runs_offline_without_a_key_and_resumes_the_same_run_by_id(tmp_path):
    ids, resumed_ids, lines = first_segment_then_resume(["wandb"], tmp_path)
    assert lines == [] and ids["wandb"]["mode"] == "offline"
    assert resumed_ids["wandb"]["id"] == ids["wandb"]["id"]
    killed, resumed = wandb_runs(tmp_path)
    assert killed["id"] == resumed["id"] == ids["wandb"]["id"]
    assert killed["config"]["run"] == {"recipe_hash": "abc"}
    # offline, W&B knows no step of the killed segment (a killed trainer's buffered file may hold
    # none), so the resumed segment holds the whole history, each step once, the resumed values past 3
    assert [(h["_step"], h["train/loss"]) for h in resumed["history"]] == [
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
        (4, 104.0),
        (5, 105.0),
        (6, 106.0),
        (7, 107.0),
    ]


def test_mlflow_defaults_to_a_local_store_under_drafter_and_resumes_the_same_run(tmp_path):
    from mlflow.tracking import MlflowClient

    ids, resumed_ids, lines = first_segment_then_resume(["mlflow"], tmp_path)
    assert lines == [] and resumed_ids == ids
    assert ids["mlflow"]["tracking_uri"] == f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=ids["mlflow"]["tracking_uri"])
    run = client.get_run(ids["mlflow"]["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["train.lr"] == "0.003"
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss"))
    assert history == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 5.0), (6, 106.0), (7, 107.0)]


def test_a_backend_that_fails_to_start_is_one_warning_and_the_others_go_on(tmp_path):
    (tmp_path / "tensorboard").write_text("a file where the event folder should be")
    lines = []
    tracker = Tracker.start(["tensorboard", "mlflow"], RunSpec(tmp_path), lines.append)
    log_steps(tracker, [1, 2], 0.0)
    tracker.close()
    assert [b.name for b in tracker.backends] == [] and len(lines) == 1
    assert lines[0].startswith("tensorboard failed to start (") and "the run goes on without it" in lines[0]


def test_a_backend_that_fails_to_write_is_dropped_after_one_warning(tmp_path):
    from mlflow.tracking import MlflowClient

    lines = []
    tracker = Tracker.start(["mlflow", "tensorboard"], RunSpec(tmp_path), lines.append)
    mlflow_ids = tracker.ids()["mlflow"]
    MlflowClient(tracking_uri=mlflow_ids["tracking_uri"]).delete_run(mlflow_ids["run_id"])  # now it refuses writes
    log_steps(tracker, [1, 2, 3], 0.0)
    assert [b.name for b in tracker.backends] == ["tensorboard"]
    tracker.close()
    assert len(lines) == 1 and lines[0].startswith("mlflow failed to write (")
    assert [s for s, _ in tensorboard_scalars(tmp_path / "tensorboard")["train/loss"]] == [1, 2, 3]


def test_evaluation_figures_reopen_the_run_tracking_json_names(tmp_path):
    from mlflow.tracking import MlflowClient

    spec = RunSpec(tmp_path)
    tracker = Tracker.start(["tensorboard", "mlflow", "wandb"], spec)
    log_steps(tracker, [1, 2], 0.0)
    write_run_file(tmp_path, ["tensorboard", "mlflow", "wandb"], tracker.ids(), spec)
    ids = tracker.ids()
    tracker.close()
    again = reopen(tmp_path)
    again.log_summary({"vllm_eval/acceptance_length": 2.5}, 2)
    again.close()
    assert tensorboard_scalars(tmp_path / "tensorboard")["train/loss"] == [(1, 1.0), (2, 2.0)]  # nothing purged
    assert tensorboard_scalars(tmp_path / "tensorboard")["vllm_eval/acceptance_length"] == [(2, 2.5)]
    client = MlflowClient(tracking_uri=ids["mlflow"]["tracking_uri"])
    assert client.get_run(ids["mlflow"]["run_id"]).data.metrics["vllm_eval/acceptance_length"] == 2.5
    assert wandb_runs(tmp_path)[-1]["summary"]["vllm_eval/acceptance_length"] == 2.5


def test_no_run_named_means_nothing_to_reopen(tmp_path):
    assert reopen(tmp_path).backends == []


def test_a_missing_package_is_one_config_error_naming_it_and_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # Python's own mark for a module that cannot be imported
    with pytest.raises(ConfigError) as caught:
        check_backends(["tensorboard", "wandb"])
    assert "the wandb package is not installed" in caught.value.message
    assert "pip install 'eagle3[tracking]'" in caught.value.fix and "remove wandb" in caught.value.fix
    check_backends(["tensorboard", "mlflow"])


def test_wandb_goes_online_only_with_a_key_and_an_answering_server(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]  # nothing listens once the socket is closed
    assert wandb_mode("auto", {}) == "offline"
    assert wandb_mode("auto", {"WANDB_MODE": "disabled"}) == "disabled"
    assert wandb_mode("online", {}) == "online"
    unreachable = {"WANDB_API_KEY": "k", "WANDB_BASE_URL": f"http://127.0.0.1:{closed}"}
    assert wandb_mode("auto", unreachable) == "offline"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        answering = {"WANDB_API_KEY": "k", "WANDB_BASE_URL": f"http://127.0.0.1:{server.getsockname()[1]}"}
        assert wandb_mode("auto", answering) == "online"


def test_flatten_names_every_number_by_where_it_sits():
    report = {"a": {"b": 1, "per": [0.5, None, 0.25], "ok": True, "name": "x"}, "n": None}
    assert flatten("eval", report) == {"eval/a/b": 1.0, "eval/a/per/0": 0.5, "eval/a/per/2": 0.25}


def test_eagle3_help_imports_no_tracking_package():
    code = (
        "import sys; sys.argv = ['eagle3', '--help']\n"
        "from flows.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('tensorboard', 'wandb', 'mlflow', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
