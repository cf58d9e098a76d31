"""The bundled family recipes: valid pipeline configs whose token ids fit the family tokenizers."""

from __future__ import annotations

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.stages.reconstruct.recipes import bundled_families, target_from_recipe
from eagle3_core.target.tokenizer import token_facts
from tests.families.real_vocabularies import TEXTS_ONLY


@pytest.mark.parametrize("family", sorted(bundled_families()))
def test_each_family_recipe_loads_and_its_ids_match_the_family_tokenizer(family, family_dirs, family_tokenizers):
    recipe = PipelineConfig.from_yaml(bundled_families()[family])
    assert recipe.target.family == family and recipe.target.template_version
    facts = token_facts(family_tokenizers[family], recipe.target, family_dirs[family])
    if family in TEXTS_ONLY:  # texts only (no file confirms the ids): each is one id of the tokenizer
        ids = (recipe.target.end_of_turn_id, recipe.target.think_open_id, recipe.target.think_close_id)
        assert ids == (None, None, None) and len(facts.think_open_ids) == 1
        return
    assert facts.end_of_turn_id == recipe.target.end_of_turn_id
    if recipe.target.think_open is not None:
        assert facts.think_open_ids == (recipe.target.think_open_id,)


def test_the_cli_target_takes_the_family_recipe_and_the_given_path(tmp_path):
    target = target_from_recipe(None, "deepseek_r1", path=str(tmp_path), trust_remote_code=False)
    assert (target.path, target.think_open_id, target.end_of_turn_id) == (str(tmp_path), 128798, 1)


def test_a_missing_recipe_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="recipe not found"):
        target_from_recipe(tmp_path / "nope.yaml", None, path=str(tmp_path))


def test_an_unknown_family_is_a_config_error_listing_the_bundled_ones(tmp_path):
    with pytest.raises(ConfigError, match="no bundled recipe for family 'nope'") as err:
        target_from_recipe(None, "nope", path=str(tmp_path))
    assert "gpt_oss" in str(err.value) and "deepseek_r1_distill_qwen" in str(err.value)


def test_the_distills_have_their_own_ids_not_r1s():
    r1 = target_from_recipe(None, "deepseek_r1")
    qwen = target_from_recipe(None, "deepseek_r1_distill_qwen")
    llama = target_from_recipe(None, "deepseek_r1_distill_llama")
    assert (r1.think_open_id, qwen.think_open_id, llama.think_open_id) == (128798, 151648, 128013)
    assert (r1.end_of_turn_id, qwen.end_of_turn_id, llama.end_of_turn_id) == (1, 151643, 128001)


BAD_RECIPES = {
    "syntax": ("target:\n  family: qwen3\n   think_open: x\n", "error: YAML syntax error at {path}:3:14: "),
    "python tag": (
        "target: !!python/object/apply:os.system ['true']\n",
        "error: YAML tag refused at {path}:1:9: could not determine a constructor for the tag",
    ),
    "not a mapping": ("- target\n", "error: the recipe is a YAML list, not a mapping of config fields"),
}


@pytest.mark.parametrize("fault", sorted(BAD_RECIPES))
def test_a_bad_recipe_is_one_line_and_exit_2_for_recipe_as_for_pipeline_config(fault, tmp_path, capsys):
    from tests.cli_helpers import cli_error, error_line

    text, expected = BAD_RECIPES[fault]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    folders = ["--input", str(tmp_path / "gen"), "--tokenizer", str(tmp_path), "--out", str(tmp_path / "seq")]

    by_recipe = error_line(cli_error(["reconstruct", *folders, "--recipe", str(path)], capsys))
    by_config = error_line(cli_error(["pipeline", "--config", str(path)], capsys))

    assert by_recipe == by_config and by_recipe.startswith(expected.format(path=path))
    assert not (tmp_path / "seq").exists()


def test_a_recipe_target_that_breaks_the_model_names_the_dotted_field_and_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("target:\n  history_reasoning: sometimes\n")
    with pytest.raises(ConfigError) as err:
        target_from_recipe(path, None)
    assert err.value.message.startswith("invalid config: target.history_reasoning: Input should be")
    assert err.value.path == str(path)
