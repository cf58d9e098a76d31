"""The DeepSpeed config: the documented defaults, and a user's file with "auto" filled in."""

import json

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.ds_config import deepspeed_config


def test_defaults_are_zero2_adamw_cosine_with_warmup_and_clip():
    ds = deepspeed_config(TrainConfig(), total_steps=1000, bf16=True)
    assert ds["zero_optimization"]["stage"] == 2 and ds["gradient_clipping"] == 0.5 and ds["bf16"]["enabled"]
    assert ds["optimizer"]["type"] == "AdamW" and ds["optimizer"]["params"]["lr"] == 1e-4
    sched = ds["scheduler"]
    assert sched["type"] == "WarmupCosineLR" and sched["params"]["total_num_steps"] == 1000
    assert sched["params"]["warmup_num_steps"] == 50


def test_a_user_file_replaces_the_config_and_auto_takes_our_values(tmp_path):
    user = {
        "zero_optimization": {"stage": 1},
        "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "torch_adam": True}},
    }
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(user))
    ds = deepspeed_config(TrainConfig(deepspeed_config=str(path), grad_clip=0.7), total_steps=10, bf16=False)
    assert ds["zero_optimization"]["stage"] == 1 and ds["gradient_clipping"] == 0.7
    assert ds["bf16"]["enabled"] is False and ds["optimizer"]["params"]["lr"] == 3e-4
    assert "scheduler" not in ds


def test_a_missing_or_broken_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        deepspeed_config(TrainConfig(deepspeed_config=str(tmp_path / "nope.json")), 10, False)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        deepspeed_config(TrainConfig(deepspeed_config=str(tmp_path / "bad.json")), 10, False)


def test_the_embedding_ships_on_request_or_when_served_with_pipeline_parallelism():
    from eagle3_core.stages.train.config import TrainConfig

    assert not TrainConfig().ships_embedding
    assert TrainConfig(export_embedding=True).ships_embedding
    assert TrainConfig(serve_pipeline_parallel_size=2).ships_embedding
    assert not TrainConfig(serve_pipeline_parallel_size=2, export_embedding=False).ships_embedding


def test_grad_accum_sets_deepspeeds_accumulation_and_counts_in_the_step_total():
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.loop import total_steps

    cfg = TrainConfig(grad_accum=2, epochs=1.0)
    assert deepspeed_config(cfg, 10, bf16=False)["gradient_accumulation_steps"] == 2
    assert total_steps(cfg, batches_per_epoch=12, world=3) == 2  # 12 micro-batches / (3 ranks x 2)


def test_a_user_file_whose_accumulation_differs_from_grad_accum_is_refused(tmp_path):
    """The loop runs train.grad_accum micro-batches per step and counts steps with it: a file with
    another accumulation would silently train several times the data and save mid-step."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"gradient_accumulation_steps": 4}))
    with pytest.raises(ConfigError, match="gradient_accumulation_steps 4 but train.grad_accum is 1") as err:
        deepspeed_config(TrainConfig(deepspeed_config=str(path)), 10, False)
    assert err.value.fix and "auto" in err.value.fix
    path.write_text(json.dumps({"gradient_accumulation_steps": "auto"}))
    assert (
        deepspeed_config(TrainConfig(deepspeed_config=str(path), grad_accum=3), 10, False)[
            "gradient_accumulation_steps"
        ]
        == 3
    )


@pytest.mark.parametrize("warmup_steps, total_steps", [(0, 100), (50, 1)])  # no warmup asked, or a one-step run
def test_no_warmup_builds_deepspeeds_scheduler_at_the_full_lr_from_the_start(warmup_steps, total_steps):
    import torch
    from deepspeed.runtime.lr_schedules import WarmupCosineLR

    cfg = TrainConfig(warmup_steps=warmup_steps, lr=3e-4)
    params = deepspeed_config(cfg, total_steps=total_steps, bf16=False)["scheduler"]["params"]
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)

    scheduler = WarmupCosineLR(optimizer, **params)  # DeepSpeed refused warmup_num_steps 0 here
    scheduler.step()  # as the engine does at each optimizer step

    assert scheduler.get_last_lr() == [pytest.approx(3e-4)]


def test_a_recipe_naming_a_missing_deepspeed_file_is_one_config_error_before_training(tiny_run, tmp_path):
    from eagle3_core.stages.train.stage import run_train
    from eagle3_core.target.config import TargetConfig

    cfg = TrainConfig(deepspeed_config=str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError, match="DeepSpeed config not found"):
        run_train(cfg, TargetConfig(path=str(tiny_run.target)), tiny_run.hidden, tiny_run.vocab, tmp_path / "drafter")
