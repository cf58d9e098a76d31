"""Tracking and the model card in a real DeepSpeed run on CPU (gloo): one run per drafter that a
killed-and-resumed training continues, read back by each tool's own reader; a failing backend
never stops training."""

import json

import pytest

from eagle3_core.drafter.card import CARD_FILE, launch_lines, read_meta
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.train.metrics import read_metrics
from tests.stages.train.test_stage import Recorder, config, train
from tests.tracking.records import tensorboard_scalars, wandb_runs

pytestmark = [pytest.mark.slow, pytest.mark.deepspeed]
ALL = ["tensorboard", "wandb", "mlflow"]


@pytest.fixture(autouse=True)
def quiet_trainer(monkeypatch, tmp_path):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # no W&B key anywhere: offline by itself
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def train_losses(out) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(out / "metrics.jsonl") if r["split"] == "train"}


def test_a_killed_run_resumes_into_the_same_tracking_run_with_every_step_once(tiny_run, tmp_path):
    from mlflow.tracking import MlflowClient

    out, cfg = tmp_path / "drafter", config(report_to=ALL)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_run, out, cfg, Recorder(stop_at=5))  # killed after the step-3 checkpoint
    first_ids = json.loads((out / "tracking.json").read_text())["ids"]
    recorder = Recorder()
    train(tiny_run, out, cfg, recorder)
    ids = json.loads((out / "tracking.json").read_text())["ids"]
    assert not [line for line in recorder.lines if "tracking warning" in line]
    assert ids["wandb"]["id"] == first_ids["wandb"]["id"] and ids["mlflow"] == first_ids["mlflow"]

    losses = train_losses(out)
    board = tensorboard_scalars(out / "tensorboard")
    assert [step for step, _ in board["train/loss"]] == [1, 2, 3, 4, 5, 6]  # the killed run's 4, 5 purged
    assert [round(v, 4) for _, v in board["train/loss"]] == [round(losses[s], 4) for s in range(1, 7)]
    assert {"train/acc_k/0", "train/loss_k/0", "train/lr", "train/tokens_per_s", "train/sim_acceptance_length"} <= set(
        board
    )
    assert [step for step, _ in board["heldout/initial/sim_acceptance_length"]] == [0]  # the untrained drafter
    assert [step for step, _ in board["heldout/sim_acceptance_length"]] == [6]  # smoothing draws a lone point as it is
    # the final figure once more as one point, which TensorBoard's smoothing draws as it is
    assert board["heldout/final_sim_acceptance_length"] == board["heldout/sim_acceptance_length"][-1:]

    segments = wandb_runs(out)
    folders = sorted(p.name for p in (out / "wandb").glob("offline-run-*"))
    assert len(segments) == 2 and all(name.split("-")[3] == ids["wandb"]["id"] for name in folders)
    resumed = segments[-1]  # offline it holds the whole history: steps up to the checkpoint sent again
    assert resumed["id"] == ids["wandb"]["id"]
    assert [row["_step"] for row in resumed["history"]] == [0, 1, 2, 3, 4, 5, 6]
    assert [round(row["train/loss"], 4) for row in resumed["history"][1:]] == [round(losses[s], 4) for s in range(1, 7)]
    assert resumed["config"]["run"]["mode"] == "offline"

    client = MlflowClient(tracking_uri=ids["mlflow"]["tracking_uri"])
    run = client.get_run(ids["mlflow"]["run_id"])
    history = [m.step for m in client.get_metric_history(run.info.run_id, "train/loss")]
    assert sorted(history) == [1, 2, 3, 4, 5, 6] and run.info.status == "FINISHED"
    assert run.data.params["run.eagle3_version"] == "0.1.0" and run.data.params["train.lr"] == "0.003"
    assert run.data.params["run.hidden_state_engine"].endswith("(extract stage, hidden/)")


def test_the_export_carries_a_card_that_evaluate_may_rewrite_without_retraining(tiny_run, tmp_path):
    from huggingface_hub import ModelCard

    out = tmp_path / "drafter"
    manifest = train(tiny_run, out, config(max_steps=2))
    card = ModelCard.load(out / "export" / CARD_FILE)
    assert card.data.base_model is None and card.data.library_name == "vllm"  # a folder's name is no hub id
    vllm, _ = launch_lines(out / "export", card.data.eagle3)
    assert f"vllm serve {tiny_run.target.name} " in vllm and "YOUR-ORG/eagle3-drafter" in vllm  # hub names: it travels
    assert str(tiny_run.target) not in card.content and str(out.resolve()) not in card.content
    assert read_meta(out / "export" / CARD_FILE)["drafter"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert not [name for name in manifest.shards if name.endswith(CARD_FILE)]
    (out / "export" / CARD_FILE).write_text(card.content + "\nevaluated\n")  # what evaluate does to it
    again = Recorder()
    train(tiny_run, out, config(max_steps=2), again)
    assert again.steps == [] and any("skipped" in line for line in again.lines)
    assert read_manifest(out).status == "complete"


def test_a_tracker_that_cannot_start_is_one_warning_line_and_training_goes_on(tiny_run, tmp_path):
    out, recorder = tmp_path / "drafter", Recorder()
    broken = {"mlflow_tracking_uri": f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"}
    (tmp_path / "a-file").write_text("not a folder: sqlite cannot create its database here")
    cfg = config(max_steps=2, report_to=["mlflow", "tensorboard"], tracking=broken)
    manifest = train(tiny_run, out, cfg, recorder)
    warnings = [line for line in recorder.lines if "tracking warning" in line]
    assert manifest.status == "complete" and recorder.steps == [1, 2]
    assert len(warnings) == 1 and "mlflow failed to start" in warnings[0]
    assert json.loads((out / "tracking.json").read_text())["report_to"] == ["tensorboard"]


def test_a_killed_run_resumes_into_the_same_run_on_an_mlflow_server(tiny_run, tmp_path):
    """The same kill and resume with MLflow's tracking URI on a real ``mlflow server`` over HTTP."""
    from mlflow.tracking import MlflowClient

    from tests.fixtures.mlflow_server import running_mlflow_server

    out = tmp_path / "drafter"
    with running_mlflow_server(tmp_path / "server") as (uri, _):
        cfg = config(report_to=["mlflow"], tracking={"mlflow_tracking_uri": uri})
        with pytest.raises(KeyboardInterrupt):
            train(tiny_run, out, cfg, Recorder(stop_at=5))  # killed after the step-3 checkpoint
        recorder = Recorder()
        train(tiny_run, out, cfg, recorder)
        ids = json.loads((out / "tracking.json").read_text())["ids"]["mlflow"]
        client = MlflowClient(tracking_uri=uri)
        run = client.get_run(ids["run_id"])
        history = sorted(m.step for m in client.get_metric_history(run.info.run_id, "train/loss"))
        experiment_runs = client.search_runs([run.info.experiment_id])
    assert not [line for line in recorder.lines if "tracking warning" in line] and ids["tracking_uri"] == uri
    assert history == [1, 2, 3, 4, 5, 6] and run.info.status == "FINISHED" and len(experiment_runs) == 1
    assert run.data.params["run.eagle3_version"] == "0.1.0" and "run.recipe_hash" in run.data.params
    assert "train/sim_acceptance_length" in run.data.metrics and "heldout/sim_acceptance_length" in run.data.metrics
