"""Configuration of the reconstruct stage."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eagle3_core.base import StageConfig


class ReconstructConfig(StageConfig):
    """Rebuild the exact token sequence the target produced, with a loss mask."""

    speed_only: ClassVar[frozenset[str]] = frozenset({"workers", "batch_rows"})  # left out of the key (run.keys)

    max_length: int = Field(4096, ge=8, description="Longest sequence kept, in tokens.")
    overlong: Literal["truncate", "drop"] = Field(
        "truncate", description="What to do with longer samples; counted either way."
    )
    prefer: Literal["server", "text"] = Field(
        "server",
        description="Train on the server's completion token ids when present (the truth), or on the re-tokenized text (for measuring the text path; a turn with tool calls always takes the ids).",
    )
    workers: int = Field(1, ge=1, description="Worker processes for tokenization.")
    shard_rows: int = Field(
        2000, ge=1, description="Samples per output shard (the unit of resume and of parallel work)."
    )
    batch_rows: int = Field(256, ge=1, description="Records tokenized in one batched encode call.")
