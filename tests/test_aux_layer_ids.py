"""Auxiliary layer ids are three distinct, increasing ids at every entry point (vLLM sorts them)."""

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.target.config import TargetConfig, aux_layer_problem


def test_unsorted_repeated_or_out_of_range_ids_are_named_with_the_fix():
    assert aux_layer_problem([2, 16, 29], 32) is None
    assert "increasing" in aux_layer_problem([29, 16, 2]) and "[2, 16, 29]" in aux_layer_problem([29, 16, 2])
    assert "differ" in aux_layer_problem([2, 2, 5])
    assert "within 0..3" in aux_layer_problem([1, 2, 4], 4)
    assert "3 layers" in aux_layer_problem([1, 2])


def test_the_target_and_extract_configs_refuse_unsorted_ids():
    with pytest.raises(ValidationError, match="target.aux_layer_ids: must be increasing"):
        TargetConfig(aux_layer_ids=[3, 1, 2])
    with pytest.raises(ValidationError, match="extract.layers: the three layers must differ"):
        ExtractConfig(layers=[1, 1, 2])


def test_a_recipe_with_unsorted_ids_fails_with_the_dotted_field(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("target:\n  aux_layer_ids: [29, 16, 2]\n")
    with pytest.raises(ConfigError, match="target: .*aux_layer_ids: must be increasing"):
        PipelineConfig.from_yaml(recipe)


@pytest.mark.parametrize("stage", ["train", "extract"])
def test_the_cli_refuses_unsorted_layers_in_one_line(stage, tmp_path):
    from flows.cli import cli

    (tmp_path / "part-00000.parquet").write_bytes(b"")  # extract looks at its --input folder first
    result = CliRunner().invoke(
        cli,
        [stage, "--input", str(tmp_path), "--target", str(tmp_path), "--out", str(tmp_path / "o"), "--layers", "3,2,1"],
    )
    assert result.exit_code == 2 and "must be increasing" in result.output
    assert "Traceback" not in result.output
