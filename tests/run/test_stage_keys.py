"""One key for every stage (``run.keys.stage_key``): its name, its key version, its config parts without their
speed-only and location fields. A rerun that changes only how fast or where resumes; one that changes what the
outputs are redoes them."""

import shutil

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.run.keys import key_part, stage_key
from eagle3_core.stages import BY_NAME, STAGES

CHANGED = object()  # model_copy(update=...) does not validate: any value stands for "another one"
# per stage, a field that decides its outputs, and another value of it
DECIDING = {
    "generate": ("max_tokens", 17),
    "reconstruct": ("max_length", 99),
    "vocab": ("draft_vocab_size", 7),
    "extract": ("shard_tokens", 5),
    "train": ("max_steps", 3),
    "evaluate": ("num_speculative_tokens", 2),
}


def test_every_stage_has_a_key_version_and_the_shipped_ones_a_deciding_field_here():
    """A new stage needs no line here (one package plus one STAGES line): its key version is the driver's default."""
    from eagle3_core.stages import load

    assert set(DECIDING) <= set(BY_NAME)
    for spec in STAGES:
        assert isinstance(load(spec.stage).key_version, int), spec.name


@pytest.mark.parametrize("name", DECIDING)
def test_a_speed_only_field_changed_keeps_the_key_and_a_deciding_one_does_not(name):
    spec = BY_NAME[name]
    model = spec.config_model
    cfg = PipelineConfig().model_dump()[spec.name]
    cfg = model.model_validate(cfg)
    assert model.speed_only <= set(model.model_fields), model.speed_only - set(model.model_fields)
    for speed in model.speed_only:
        assert key_part(cfg.model_copy(update={speed: CHANGED})) == key_part(cfg), speed
    field, other = DECIDING[spec.name]
    assert key_part(cfg.model_copy(update={field: other})) != key_part(cfg), field


def test_where_a_thing_lives_is_never_in_a_key_and_the_stage_and_version_always_are():
    from eagle3_core.target.config import TargetConfig

    here, there = TargetConfig(path="/models/kimi"), TargetConfig(path="/mnt/elsewhere/kimi")
    assert stage_key("evaluate", 1, target=here) == stage_key("evaluate", 1, target=there)
    assert stage_key("evaluate", 1, target=here) != stage_key("evaluate", 2, target=here)
    assert stage_key("evaluate", 1, target=here) != stage_key("train", 1, target=here)


def test_extract_resumes_its_complete_folder_with_another_batch_budget_and_its_target_moved(tmp_path, monkeypatch):
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.target.config import TargetConfig
    from tests.stages.extract.helpers import build_tiny_llama, write_sequences

    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    model = build_tiny_llama(tmp_path / "target", layers=6)
    write_sequences(tmp_path / "seq", [[10, 20, 30], [40, 50]])
    first = run_extract(
        ExtractConfig(layers=[1, 3, 4], device="cpu"), TargetConfig(path=str(model)), tmp_path / "seq", tmp_path / "h"
    )
    moved = TargetConfig(path=str(shutil.move(model, tmp_path / "elsewhere")))

    faster = ExtractConfig(layers=[1, 3, 4], device="cpu", max_tokens_per_batch=2, disk_headroom=2.0)
    again = run_extract(faster, moved, tmp_path / "seq", tmp_path / "h")

    assert again.updated_at == first.updated_at and again.config_hash == first.config_hash  # skipped
    other = run_extract(faster.model_copy(update={"shard_tokens": 2}), moved, tmp_path / "seq", tmp_path / "h")
    assert other.config_hash != first.config_hash
