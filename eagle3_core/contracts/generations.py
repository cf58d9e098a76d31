"""generations/ (written by generate): ``accepted/part-*.parquet`` in name order."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts import parquet
from eagle3_core.contracts.folder import listed_parts

if TYPE_CHECKING:
    import pyarrow as pa

STAGE = "generate"
ACCEPTED = "accepted"


def accepted_parts(generations_dir: str | Path) -> list[Path]:
    """Every accepted part, in name order (``folder.listed_parts``)."""
    return listed_parts(generations_dir, STAGE, "accepted generation shards", under=ACCEPTED)


def num_rows(part: str | Path) -> int:
    return parquet.num_rows(part, STAGE)


def read(part: str | Path, columns: list[str], optional: tuple[str, ...] = ()) -> "pa.Table":
    """``columns`` of one part; those in ``optional`` may be absent (older parts lack some)."""
    return parquet.read_table(part, STAGE, columns, optional)
