"""Served as trained: evaluate refuses a k past the block a DFlash or DSpark export was trained for
(``num_speculative_tokens`` or a ``k_sweep`` entry) in one ConfigError before anything starts, for
the CLI's config and the pipeline's alike; at the block it passes, and EAGLE-3 drafts any k."""

import json
import shutil

import pytest

from eagle3_core.drafter.kinds import TRAINED_K
from eagle3_core.errors import ConfigError
from eagle3_core.stages.evaluate.compat import check_draft_length
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.stage import EvaluateStage, run_evaluate
from eagle3_core.target.config import TargetConfig
from tests.stages.evaluate.models import make_block_export
from tests.stages.evaluate.test_stage import tripwire

BLOCK = {"dflash": 4, "dspark": 3}  # make_block_export's blocks: k = 3 for both


@pytest.fixture(scope="module", params=list(BLOCK))
def block_export(request, chat_target, tmp_path_factory):
    return make_block_export(request.param, tmp_path_factory.mktemp(request.param), chat_target)


def kind_of(export) -> str:
    return "dflash" if "dflash_config" in json.loads((export / "config.json").read_text()) else "dspark"


def test_a_k_past_the_trained_block_is_one_config_error_before_anything_starts(block_export, chat_target, tmp_path):
    serve, marker = tripwire(tmp_path)
    cfg = EvaluateConfig(num_speculative_tokens=4)
    with pytest.raises(ConfigError) as err:
        run_evaluate(cfg, TargetConfig(path=str(chat_target)), block_export, tmp_path / "eval", serve)
    kind = kind_of(block_export)
    assert err.value.message.startswith("evaluate.num_speculative_tokens 4 drafts past the block")
    assert f"(block_size {BLOCK[kind]}: at most k = 3)" in err.value.message
    assert err.value.fix == (
        f"lower evaluate.num_speculative_tokens to at most 3 (`eagle3 evaluate -k 3`), "
        f"or retrain with a larger train.{kind}.block_size"
    )
    assert not marker.exists() and not (tmp_path / "eval").exists()  # refused in keys: nothing touched


def test_a_k_sweep_entry_past_the_trained_block_is_refused_naming_the_sweep(block_export, chat_target, tmp_path):
    serve, marker = tripwire(tmp_path)
    cfg = EvaluateConfig(num_speculative_tokens=2, k_sweep=[1, 5])
    with pytest.raises(ConfigError, match=r"^evaluate\.k_sweep \[1, 5\] drafts past the block") as err:
        run_evaluate(cfg, TargetConfig(path=str(chat_target)), block_export, tmp_path / "eval", serve)
    assert err.value.fix.startswith("lower evaluate.k_sweep to at most 3 (or leave it unset: 1 to 3)")
    assert not marker.exists()


def test_at_the_trained_block_the_check_passes_and_the_default_sweep_stops_there(block_export, chat_target, tmp_path):
    assert check_draft_length(EvaluateConfig(num_speculative_tokens=3, k_sweep=[1, 3]), block_export).k_sweep == [1, 3]
    stage = EvaluateStage(
        EvaluateConfig(num_speculative_tokens=3), TargetConfig(path=str(chat_target)), block_export, tmp_path
    )
    stage.keys()  # the config hash is taken over the sweep that runs
    assert stage.cfg.k_sweep == [1, 2, 3]


def test_an_eagle3_export_drafts_any_k(chat_export):
    cfg = check_draft_length(EvaluateConfig(num_speculative_tokens=8, k_sweep=None), chat_export)
    assert cfg.num_speculative_tokens == 8 and cfg.k_sweep == [1, 2, 3, 4, 5]


def test_an_export_from_before_the_stated_k_is_checked_on_its_block_size(block_export, tmp_path):
    old = shutil.copytree(block_export, tmp_path / "old")
    config = json.loads((old / "config.json").read_text())
    del config[TRAINED_K]
    (old / "config.json").write_text(json.dumps(config))
    assert check_draft_length(EvaluateConfig(num_speculative_tokens=3), old).k_sweep == [1, 2, 3]
    with pytest.raises(ConfigError, match=r"evaluate\.num_speculative_tokens 4 .*at most k = 3"):
        check_draft_length(EvaluateConfig(num_speculative_tokens=4), old)


def test_the_clis_k_meets_the_check_in_the_stage(block_export, chat_target, tmp_path):
    """`eagle3 evaluate -k 4` builds its config with ``evaluate_config`` and runs the declared stage,
    whose ``keys`` refuse it (the Prefect flow around it is left out here: it starts an API)."""
    from flows.cli.evaluate import evaluate_config

    cfg = evaluate_config(str(chat_target), None, "train", None, 4, False, False, False)
    stage = EvaluateStage(cfg, TargetConfig(path=str(chat_target)), block_export, tmp_path / "eval")
    with pytest.raises(ConfigError, match=r"^evaluate\.num_speculative_tokens 4 drafts past the block"):
        stage.keys()


def test_the_pipelines_k_meets_the_check_before_vllm_is_started_for_evaluate(block_export, chat_target, tmp_path):
    """The pipeline builds the declared stage (``StageSpec.build``) and asks whether it would skip
    before it serves vLLM for it: that runs ``keys``."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.stages import BY_NAME, folder_of

    config = PipelineConfig(out=str(tmp_path / "run"), target={"path": str(chat_target)}, evaluate={"k_sweep": [4]})
    shutil.copytree(block_export, folder_of("train/export", config))
    with pytest.raises(ConfigError, match=r"^evaluate\.k_sweep \[4\] drafts past the block"):
        BY_NAME["evaluate"].build(config).keys()
