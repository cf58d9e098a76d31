"""The strict pydantic base every config and on-disk record derives from."""

from __future__ import annotations

import hashlib
import json
from typing import ClassVar

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


def stable_hash(obj: object, length: int = 16) -> str:
    """sha256 of the canonical JSON of ``obj``: the same content always gives the same key."""
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]
