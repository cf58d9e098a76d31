"""The toy target as a task: built once per recipe, then loaded from its cache; and ``{toy}``, the
placeholder for its directory, expanded wherever a flow takes a recipe or a recipe's section.

``{toy}`` in any string of a flow's parameters (a prompts ``input``, ``target.path``, an output folder)
stands for the built toy target's directory: the recipe's ``toy:`` build where the flow takes a whole
recipe (pipeline, nightly), else the default toy's (``ToyTargetConfig()``, which is configs/toy.yaml's
``toy:``), as in a stage flow such as the generate deployment's. The directory's name is the hash of
the toy's recipe under the machine's cache, so no deployment could state it: it is known only where
the run runs. A parameter without ``{toy}`` builds nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from prefect import task
from pydantic import BaseModel

from eagle3_core.toy.config import ToyTargetConfig

TOY_DIR = "{toy}"  # in any string of a recipe, stands for the built toy target's directory
T = TypeVar("T")


@task(name="toy-target")
def build_toy(cfg: ToyTargetConfig) -> str:
    """Build the toy target or load it from its cache (keyed by the hash of its recipe)."""
    from eagle3_core.toy.build import build_toy_target
    from tasks.common import PrefectReporter

    return str(build_toy_target(cfg, reporter=PrefectReporter("toy")))


def with_toy_dir(value: T, toy: ToyTargetConfig | None = None) -> T:
    """``value`` (a config, a flow's arguments) with ``{toy}`` in each string replaced by the toy's
    directory (``toy``'s build, else the default toy's), built first where it is not cached. Returned
    as it is, and nothing built, when no string in it holds ``{toy}``."""
    if not holds(value, TOY_DIR):
        return value
    # a copy: Prefect links a parameter to the task whose result has the same id (an edge from the toy)
    return replaced(value, TOY_DIR, str(Path(build_toy(toy or ToyTargetConfig()))))


def holds(value: Any, text: str) -> bool:
    """Whether a string anywhere in ``value`` (models, mappings, sequences) contains ``text``."""
    if isinstance(value, str):
        return text in value
    if isinstance(value, BaseModel):
        value = dict(value)
    if isinstance(value, dict):
        return any(holds(v, text) for v in value.values())
    return isinstance(value, (list, tuple)) and any(holds(v, text) for v in value)


def replaced(value: T, old: str, new: str) -> T:
    """``value`` with ``old`` replaced by ``new`` in every string, models copied with only the fields
    that changed (no validator runs again: a path's text is all that changes)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, BaseModel):
        changed = {k: replaced(v, old, new) for k, v in dict(value).items() if holds(v, old)}
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, dict):
        return {k: replaced(v, old, new) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(replaced(v, old, new) for v in value)
    return value
