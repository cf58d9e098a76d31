"""Configuration of the reconstruct stage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from eagle3_core.base import StrictModel, stable_hash


class ReconstructConfig(StrictModel):
    """Rebuild the exact token sequence the target produced, with a loss mask."""

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

    def output_hash(self) -> str:
        """Hash of the fields that change the output (``workers`` and ``batch_rows`` only change speed)."""
        return stable_hash(self.model_dump(mode="json", exclude={"workers", "batch_rows"}))
