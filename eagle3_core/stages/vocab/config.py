"""Configuration of the vocab stage."""

from __future__ import annotations

from pydantic import Field

from eagle3_core.base import StageConfig


class VocabConfig(StageConfig):
    """Pick the draft vocabulary: the most frequent supervised tokens."""

    draft_vocab_size: int = Field(32000, ge=1, description="Draft vocabulary size; capped by the target vocabulary.")
