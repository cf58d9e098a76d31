"""The toy target as a task: built once per recipe, then loaded from its cache."""

from __future__ import annotations

from prefect import task

from eagle3_core.toy.config import ToyTargetConfig


@task(name="toy-target")
def build_toy(cfg: ToyTargetConfig) -> str:
    """Build the toy target or load it from its cache (keyed by the hash of its recipe)."""
    from eagle3_core.toy.build import build_toy_target
    from tasks.common import PrefectReporter

    return str(build_toy_target(cfg, reporter=PrefectReporter("toy")))
