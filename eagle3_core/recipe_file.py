"""A recipe file read as YAML: the one way every command reads one (``pipeline --config``,
``--recipe``), so a recipe's fault is the same one-line ``ConfigError`` (exit 2) whichever reads it.

``yaml.safe_load`` only: a tag such as ``!!python/object`` is refused as an error naming the
file, line and column, never constructed. A syntax error names the line and column; a file that
is not UTF-8 or not a mapping names the file; a validation error names the dotted field.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from eagle3_core.errors import ConfigError


def read_yaml(path: Path) -> dict:
    """The recipe's mapping; a syntax error names the file, line and column."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.constructor.ConstructorError as exc:  # a tag safe_load does not build (!!python/object)
        raise ConfigError(
            f"YAML tag refused at {_where(path, exc)}: {exc.problem or exc.context}",
            path=str(path),
            fix="a recipe holds plain YAML values: remove the tag (a !!python tag would run code when loaded)",
        ) from None
    except yaml.MarkedYAMLError as exc:
        raise ConfigError(
            f"YAML syntax error at {_where(path, exc)}: {exc.problem or exc.context}",
            path=str(path),
            fix="fix the recipe's YAML at that line (indentation, a missing ':' or quote)",
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the recipe as YAML: {exc}",
            path=str(path),
            fix="a recipe is a UTF-8 YAML mapping, e.g. configs/toy.yaml",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"the recipe is a YAML {type(data).__name__}, not a mapping of config fields",
            path=str(path),
            fix="start from configs/toy.yaml",
        )
    return data


def _where(path: Path, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)


def format_validation_error(exc: ValidationError, under: tuple[str, ...] = ()) -> str:
    """One line per problem, each naming the dotted field (a rule across fields names them itself;
    ``under``: the section a model of one section was read from, ``("target",)``); one problem is
    one line, so it is the whole failure message of a Prefect run too."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in (*under, *err["loc"]))
        message = err["msg"].removeprefix("Value error, ")
        problems.append(f"{field}: {message}" if field else message)
    if len(problems) == 1:
        return f"invalid config: {problems[0]}"
    return "\n".join(["invalid config:", *(f"  {problem}" for problem in problems)])
