"""sequences/ (written by reconstruct): ``part-*.parquet`` in name order, read whole or by column."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts import parquet
from eagle3_core.contracts.folder import listed_parts

if TYPE_CHECKING:
    import pyarrow as pa

STAGE = "reconstruct"


def parts(sequences_dir: str | Path) -> list[Path]:
    """Every sequences part, in name order (``folder.listed_parts``)."""
    return listed_parts(sequences_dir, STAGE, "sequences found")


def num_rows(part: str | Path) -> int:
    return parquet.num_rows(part, STAGE)


def read(part: str | Path, columns: list[str] | None = None) -> "pa.Table":
    """One part (its ``columns``); a missing column or a damaged file names the part."""
    return parquet.read_table(part, STAGE, columns)


def lengths(part: str | Path) -> tuple[list[str], list[int]]:
    """(sample ids, token counts) of one part, in row order (its ``num_tokens`` column)."""
    table = read(part, ["sample_id", "num_tokens"])
    return table["sample_id"].to_pylist(), [int(n) for n in table["num_tokens"].to_pylist()]


def token_total(sequences_dir: str | Path) -> int:
    """Tokens of every sample of the folder."""
    return sum(sum(lengths(p)[1]) for p in parts(sequences_dir))


def longest(sequences_dir: str | Path) -> int:
    """Tokens of the folder's longest sample."""
    return max(max(lengths(p)[1], default=0) for p in parts(sequences_dir))
