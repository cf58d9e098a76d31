"""train.variant: presets resolve to the model's fields, and a variant an engine cannot read is one
ConfigError naming the field, before anything trains."""

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.drafter.model import DrafterConfig
from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import DrafterVariant
from tests.drafter.test_model import tiny_config


def test_eagle3_is_the_default_and_eagle3_1_turns_on_fc_norm_and_norm_output():
    assert DrafterVariant().architecture() == {
        "fc_norm": False,
        "norm_output": False,
        "norm_before_fc": False,
        "num_hidden_layers": 1,
    }
    assert DrafterVariant(preset="eagle3.1").architecture() == {
        "fc_norm": True,
        "norm_output": True,
        "norm_before_fc": False,
        "num_hidden_layers": 1,
    }
    mixed = DrafterVariant(preset="eagle3.1", norm_output=False, num_hidden_layers=2).architecture()
    assert (mixed["fc_norm"], mixed["norm_output"], mixed["num_hidden_layers"]) == (True, False, 2)


def test_the_architecture_reaches_the_model_config_and_its_export():
    arch = DrafterVariant(preset="eagle3.1", num_hidden_layers=2).architecture()
    c = tiny_config(**arch)
    hf = c.to_hf()
    assert (hf["fc_norm"], hf["norm_output"], hf["num_hidden_layers"]) == (True, True, 2)
    assert DrafterConfig.from_hf(hf) == c


def recipe(tmp_path, train_yaml: str):
    path = tmp_path / "recipe.yaml"
    path.write_text("train:\n" + train_yaml)
    return path


def test_norm_before_fc_for_sglang_is_a_config_error_naming_the_field(tmp_path):
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_yaml(
            recipe(tmp_path, "  variant:\n    norm_before_fc: true\n    loaders: [vllm, sglang]\n")
        )
    message = str(info.value)
    assert "train.variant.norm_before_fc" in message and "sglang" in message
    assert "train.variant.loaders" in message  # the fix


def test_every_variant_served_by_vllm_is_accepted_and_eagle3_1_by_sglang_too(tmp_path):
    cfg = PipelineConfig.from_yaml(recipe(tmp_path, "  variant:\n    norm_before_fc: true\n"))
    assert cfg.train.variant.loaders == ["vllm"] and cfg.train.variant.architecture()["norm_before_fc"] is True
    both = "  variant:\n    preset: eagle3.1\n    num_hidden_layers: 2\n    loaders: [vllm, sglang]\n"
    assert PipelineConfig.from_yaml(recipe(tmp_path, both)).train.variant.architecture()["fc_norm"] is True


@pytest.mark.parametrize(
    "bad,field",
    [
        ("    num_hidden_layers: 0\n", "train.variant.num_hidden_layers"),
        ("    preset: eagle4\n", "train.variant.preset"),
        ("    loaders: []\n", "train.variant.loaders"),
        ("    loaders: [tgi]\n", "train.variant.loaders"),
    ],
)
def test_a_variant_no_loader_knows_is_a_config_error_naming_the_field(tmp_path, bad, field):
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_yaml(recipe(tmp_path, "  variant:\n" + bad))
    assert field in str(info.value)


def test_the_variant_is_part_of_what_decides_the_trained_weights():
    from eagle3_core.stages.train.config import TrainConfig
    from tests.stages.train.keys import train_key

    assert train_key(TrainConfig()) != train_key(TrainConfig(variant=DrafterVariant(preset="eagle3.1")))
