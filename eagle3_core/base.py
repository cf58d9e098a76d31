"""The strict pydantic base every config and on-disk record derives from."""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A model that refuses unknown fields, so a typo in a YAML recipe is an error, not a no-op."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    # a stage config's fields that change how fast its work runs, never its outputs: left out of its key
    speed_only: ClassVar[frozenset[str]] = frozenset()

    def unkeyed(self) -> set[str]:
        """The fields a stage's key leaves out (``run.keys.stage_key``): ``speed_only`` unless a config says more."""
        return set(self.speed_only)

    def content_hash(self) -> str:
        """A stable 16-hex digest of the model's content (keys sorted, JSON mode)."""
        return stable_hash(self.model_dump(mode="json"))


class StageConfig(StrictModel):
    """A stage's section of the pipeline config (``config.PipelineConfig``), with the hooks through which it
    takes what it needs of the run's shared settings, so the pipeline config names no stage."""

    # dotted fields the run fills in (``in_run``): left out of the recipe's hash (a form hides them by their own
    # ``SkipJsonSchema`` type)
    run_filled: ClassVar[tuple[str, ...]] = ()

    def in_run(self, run: Any) -> Self:
        """This section as the run ``run`` (the whole ``PipelineConfig``, its sections before this one settled)
        settles it; as it is by default."""
        return self

    def needs_target(self, run: Any) -> bool:
        """Whether this stage, selected, needs ``target.path`` (checked before the first stage runs)."""
        return True

    def refusal_in_run(self, run: Any) -> tuple[str, str] | None:
        """Why this stage, selected, cannot run with ``run``'s settings, and the fix (recipe fields, not flags);
        None when it can. Asked before anything starts."""
        return None


def stable_hash(obj: object, length: int = 16) -> str:
    """sha256 of the canonical JSON of ``obj``: the same content always gives the same key."""
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]
