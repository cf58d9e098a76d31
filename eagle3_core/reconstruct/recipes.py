"""The `target:` section of a bundled family recipe (configs/<family>.yaml).

The CLI's ``--family qwen3`` reads the token facts (think tokens, end-of-turn, their ids) from
the recipe, so ids live in recipes only, never in code.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from eagle3_core.errors import ConfigError
from eagle3_core.target import TargetConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FAMILY_RECIPES = {
    "kimi_k2_5": "kimi-k2.5.yaml",
    "qwen3": "qwen3.yaml",
    "deepseek_r1": "deepseek-r1.yaml",
    "llama3": "llama3.yaml",
}


def target_from_recipe(recipe: str | Path | None, family: str | None, **overrides) -> TargetConfig:
    """TargetConfig from ``recipe`` (a YAML file), else the bundled recipe of ``family``, else defaults."""
    if recipe is None and family is not None:
        recipe = CONFIGS / FAMILY_RECIPES[family]
    section = {}
    if recipe is not None:
        path = Path(recipe)
        if not path.is_file():
            raise ConfigError(f"recipe not found: {path}", fix="pass --family or a --recipe YAML file")
        section = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("target") or {}
    try:
        return TargetConfig.model_validate({**section, **overrides})
    except ValueError as exc:
        raise ConfigError(f"invalid target section in {recipe}: {exc}") from None
