"""train.report_to checked before any work: a named backend whose package is missing is one ConfigError."""

import sys

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.stages.train.keys import train_key


def test_tensorboard_is_on_by_default_and_where_a_run_reports_never_retrains():
    assert TrainConfig().report_to == ["tensorboard"]
    moved = TrainConfig(report_to=["wandb", "mlflow"], tracking={"project": "kimi", "wandb_mode": "offline"})
    assert train_key(moved) == train_key(TrainConfig())


def test_a_backend_whose_package_is_missing_stops_the_stage_before_it_writes(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # Python's own mark for a module that cannot be imported
    with pytest.raises(ConfigError) as caught:
        run_train(TrainConfig(report_to=["mlflow"]), TargetConfig(path=str(tmp_path)), None, None, tmp_path / "drafter")
    assert "the mlflow package is not installed" in caught.value.message
    assert "pip install 'eagle3[tracking]'" in caught.value.fix
    assert not (tmp_path / "drafter").exists()


def test_the_pipeline_gives_train_its_recipe_hash():
    from eagle3_core.config import PipelineConfig

    recipe = PipelineConfig.from_yaml("configs/toy.yaml")
    assert recipe.train.tracking.recipe_hash == recipe.recipe_hash()
    assert recipe.model_copy(update={"out": "elsewhere"}).recipe_hash() == recipe.recipe_hash()
    changed = PipelineConfig.model_validate({**recipe.model_dump(mode="json"), "vocab": {"draft_vocab_size": 41}})
    assert changed.train.tracking.recipe_hash != recipe.recipe_hash()


def test_a_resumed_trainer_resends_metrics_up_to_the_checkpoint_and_each_backend_keeps_each_step_once(
    tmp_path, monkeypatch
):
    """The trainer's side without DeepSpeed: rank 0's tracker, resumed from a checkpoint's client state."""
    import json

    from mlflow.tracking import MlflowClient

    from eagle3_core.stages.train.tracking import start_tracker
    from tests.tracking.records import tensorboard_scalars, wandb_runs

    for name in ("WANDB_API_KEY", "WANDB_MODE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    out, cfg = tmp_path / "drafter", TrainConfig(report_to=["tensorboard", "wandb", "mlflow"])
    out.mkdir()
    metrics = out / "metrics.jsonl"
    lines = [{"step": s, "split": "train", "loss": float(s), "acc_k": [0.5]} for s in range(1, 6)]
    metrics.write_text("".join(json.dumps(l) + "\n" for l in lines))
    assert start_tracker(cfg, {}, metrics, 1, None).backends == []  # only rank 0 tracks
    killed = start_tracker(cfg, {"mode": "offline"}, metrics, 0, None)
    for line in lines:
        killed.log({"train/loss": line["loss"]}, line["step"])
    client = {"step": 3, "tracking": killed.ids()}
    killed.close(failed=True)
    metrics.write_text("".join(json.dumps(l) + "\n" for l in lines[:3]))  # the resume cuts it at the checkpoint
    resumed = start_tracker(cfg, {"mode": "offline"}, metrics, 0, client)
    for step in (4, 5, 6):
        resumed.log({"train/loss": 100.0 + step}, step)
    ids = resumed.ids()
    resumed.close()
    assert [v for _, v in tensorboard_scalars(out / "tensorboard")["train/loss"]] == [1, 2, 3, 104, 105, 106]
    assert [row["_step"] for row in wandb_runs(out)[-1]["history"]] == [1, 2, 3, 4, 5, 6]
    history = MlflowClient(ids["mlflow"]["tracking_uri"]).get_metric_history(ids["mlflow"]["run_id"], "train/loss")
    assert sorted((m.step, m.value) for m in history) == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 106)]
