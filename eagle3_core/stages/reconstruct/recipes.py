"""The `target:` section of a bundled family recipe (configs/<family>.yaml).

The CLI's ``--family qwen3`` reads the token facts (think tokens, end-of-turn, their ids) from
the recipe, so ids live in recipes only, never in code. The families are the bundled recipes
themselves (each file's ``target.family``): a new family is a new file, no list to extend.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from eagle3_core.errors import ConfigError
from eagle3_core.recipe_file import format_validation_error, read_yaml
from eagle3_core.target.config import TargetConfig

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def bundled_families() -> dict[str, Path]:
    """family name -> its recipe under configs/ (the toy, which builds its own target, excluded)."""
    found: dict[str, Path] = {}
    for path in sorted(CONFIGS.glob("*.yaml")):
        recipe = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        family = (recipe.get("target") or {}).get("family")
        if family and "toy" not in recipe:
            found.setdefault(family, path)
    return found


def target_from_recipe(recipe: str | Path | None, family: str | None, **overrides) -> TargetConfig:
    """TargetConfig from ``recipe`` (a YAML file), else the bundled recipe of ``family``, else defaults."""
    if recipe is None and family is not None:
        families = bundled_families()
        if family not in families:
            raise ConfigError(
                f"no bundled recipe for family {family!r}",
                fix=f"pass one of {', '.join(sorted(families))}, or a --recipe YAML file",
            )
        recipe = families[family]
    section = {} if recipe is None else target_section(Path(recipe))
    try:
        return TargetConfig.model_validate({**section, **overrides})
    except ValidationError as exc:  # the dotted field, as `pipeline --config` names it
        where = None if recipe is None else str(recipe)
        raise ConfigError(format_validation_error(exc, under=("target",)), path=where) from None


def target_section(path: Path) -> dict:
    """The recipe's ``target:`` mapping, read as ``pipeline --config`` reads a recipe (one-line errors)."""
    if not path.is_file():
        raise ConfigError(f"recipe not found: {path}", fix="pass --family or a --recipe YAML file")
    section = read_yaml(path).get("target") or {}
    if not isinstance(section, dict):
        raise ConfigError(
            f"the recipe's target is a YAML {type(section).__name__}, not a mapping of target fields",
            path=str(path),
            fix="start from a bundled recipe such as configs/qwen3.yaml",
        )
    return section
