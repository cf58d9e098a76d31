"""The generate stage's lifecycle for a run's keys: one definition of its shards and versions for
both sources (served, ``stage.py``; the dataset's own answers, ``dataset_source.py``), which each
compute their own keys, so neither imports the other."""

from __future__ import annotations

from pathlib import Path

from eagle3_core.lifecycle import StageLifecycle
from eagle3_core.progress import Reporter

STAGE = "generate"


def lifecycle_for(
    keys: tuple[str, dict[str, str]], out_dir: str | Path, reporter: Reporter | None = None
) -> StageLifecycle:
    return StageLifecycle(
        STAGE,
        out_dir,
        *keys,
        shards=("accepted/part-*.parquet", "rejected/part-*.parquet", "turns/part-*.parquet"),
        versions=("openai", "polars", "httpx"),
        reporter=reporter,
    )
