"""train.report_to checked before any work: a named backend whose package is missing is one ConfigError."""

import sys

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.target import TargetConfig
from eagle3_core.train.config import TrainConfig
from eagle3_core.train.stage import run_train


def test_tensorboard_is_on_by_default_and_where_a_run_reports_never_retrains():
    assert TrainConfig().report_to == ["tensorboard"]
    moved = TrainConfig(report_to=["wandb", "mlflow"], tracking={"project": "kimi", "wandb_mode": "offline"})
    assert moved.output_hash() == TrainConfig().output_hash()


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
