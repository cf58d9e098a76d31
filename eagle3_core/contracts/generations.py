"""generations/ (written by generate): ``accepted/part-*.parquet`` in name order."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts import parquet
from eagle3_core.contracts.folder import check_listed
from eagle3_core.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

STAGE = "generate"
ACCEPTED = "accepted"


def accepted_parts(generations_dir: str | Path) -> list[Path]:
    """Every accepted part, in name order, after the folder is held to its manifest (a listed
    part gone or cut short is named); an error that says what to run when there are none."""
    check_listed(generations_dir, STAGE)
    accepted = Path(generations_dir) / ACCEPTED
    found = sorted(accepted.glob("part-*.parquet")) if accepted.is_dir() else []
    if not found:
        raise InputError(
            f"no accepted generation shards (accepted/part-*.parquet) in {generations_dir}",
            path=str(accepted),
            fix="run `eagle3 generate --out DIR` first and pass that DIR as --input",
        )
    return found


def num_rows(part: str | Path) -> int:
    return parquet.num_rows(part, STAGE)


def read(part: str | Path, columns: list[str], optional: tuple[str, ...] = ()) -> "pa.Table":
    """``columns`` of one part; those in ``optional`` may be absent (older parts lack some)."""
    return parquet.read_table(part, STAGE, columns, optional)
