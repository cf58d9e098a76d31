"""Parquet parts read with the damage named: the file, what is wrong, and which stage remakes it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts.folder import damaged
from eagle3_core.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq


@contextlib.contextmanager
def named_damage(path: str | Path, stage: str) -> Iterator[None]:
    """Turn pyarrow's errors while reading ``path`` into one ``damaged`` error naming it."""
    import pyarrow as pa

    try:
        yield
    except FileNotFoundError:
        raise damaged(path, "the file is missing", stage) from None
    except (pa.ArrowException, OSError, ValueError) as exc:  # torn footer, bad page, wrong magic
        text = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise damaged(path, f"not a readable Parquet file ({text})", stage) from None


def open_part(path: str | Path, stage: str) -> "pq.ParquetFile":
    import pyarrow.parquet as pq

    with named_damage(path, stage):
        return pq.ParquetFile(path)


def num_rows(path: str | Path, stage: str) -> int:
    """Row count from the footer (cheap)."""
    return open_part(path, stage).metadata.num_rows


def read_table(
    path: str | Path, stage: str, columns: list[str] | None = None, optional: tuple[str, ...] = ()
) -> "pa.Table":
    """The part (or its ``columns``; those in ``optional`` are left out when the part lacks them)."""
    handle = open_part(path, stage)
    if columns is not None:
        names = handle.schema_arrow.names
        missing = [c for c in columns if c not in names and c not in optional]
        if missing:
            raise InputError(
                f"{Path(path).name} lacks columns {missing}",
                path=str(path),
                fix=f"the folder must follow docs/stages/{stage}.md: rerun `eagle3 {stage}` into a new --out",
            )
        columns = [c for c in columns if c in names]
    with named_damage(path, stage):
        return handle.read(columns=columns)
