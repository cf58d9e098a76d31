"""The pipeline config: strict, loadable from recipes, errors that name the field."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.target.config import TargetConfig

ROOT = Path(__file__).resolve().parents[1]


def test_unknown_field_is_an_error_naming_the_dotted_field(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("generate:\n  concurency: 8\n")
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_yaml(recipe)
    assert "generate.concurency" in str(info.value)
    assert str(recipe) in str(info.value)


def test_missing_recipe_says_which_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        PipelineConfig.from_yaml(tmp_path / "nope.yaml")


def test_config_hash_changes_with_content_and_only_with_content():
    a, b = PipelineConfig(), PipelineConfig()
    assert a.content_hash() == b.content_hash()
    b.train.ttt_steps = 3
    assert a.content_hash() != b.content_hash()


def test_think_tokens_must_come_in_pairs():
    with pytest.raises(ValueError, match="both be set"):
        PipelineConfig.model_validate({"target": {"think_open": "<think>", "think_close": None}})


def test_a_target_without_a_path_is_a_config_error_with_the_fix_not_a_traceback():
    from eagle3_core.target.config import TargetConfig

    with pytest.raises(ConfigError, match="target.path is not set") as err:
        TargetConfig().require_path()
    assert "fix: point target.path" in str(err.value)


def test_a_thinking_switch_of_words_reads_each_word_as_its_recipe_says():
    """MiniMax-M3's `thinking_mode` is a word: "disabled" is not thinking, though bool("disabled") is True."""
    m3 = PipelineConfig.from_yaml(ROOT / "configs" / "minimax-m3.yaml").target
    states = {}
    for word in ("enabled", "disabled", "adaptive"):
        chat = m3.chat.model_copy(update={"chat_template_kwargs": {"thinking_mode": word}})
        states[word] = m3.thinking_state(chat)
    assert states == {"enabled": True, "disabled": False, "adaptive": None}
    with pytest.raises(ValidationError, match="'sometimes' is a word, and target.thinking.states"):
        TargetConfig.model_validate(
            {**m3.model_dump(), "chat": {"chat_template_kwargs": {"thinking_mode": "sometimes"}}}
        )
