"""Where prompts come from: a local jsonl/json/parquet file or folder, or a Hugging Face dataset.

Generate reads its prompts with it, and evaluate its held-out prompts, so a row means the same
thing to both (``inputs.py`` reads them).
"""

from __future__ import annotations

from pydantic import Field

from eagle3_core.base import StrictModel


class PromptSource(StrictModel):
    """Where prompts come from: a local jsonl/parquet file or a Hugging Face dataset."""

    input: str = Field(
        description="Local .jsonl/.json/.parquet path, a directory of them, or a Hugging Face dataset name (e.g. mlabonne/open-perfectblend)."
    )
    split: str = Field(
        "train",
        description="Dataset split, for Hugging Face datasets: a hub dataset, or a `save_to_disk` folder holding a DatasetDict.",
    )
    max_samples: int | None = Field(None, ge=1, description="Take at most this many input rows (in input order).")
