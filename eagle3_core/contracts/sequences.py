"""sequences/ (written by reconstruct): ``part-*.parquet`` in name order, read whole or by column.

The columns are declared here once (``COLUMNS``, ``schema``): reconstruct writes with them
(``table``), readers take them, and every test fixture that stands in for reconstruct's output
builds its parts with ``table`` too (four fixtures had restated them and drifted: ``num_tokens`` as
int64, three columns of six). ``schema_problem`` says how a part differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts import parquet
from eagle3_core.contracts.folder import listed_parts

if TYPE_CHECKING:
    import pyarrow as pa

STAGE = "reconstruct"
# name -> Arrow type, in the file's order
COLUMNS = (
    ("sample_id", "string"),
    ("input_ids", "list<int32>"),
    ("loss_mask", "list<uint8>"),
    ("num_tokens", "int32"),
    ("num_supervised", "int32"),
    ("source", "string"),  # "server" (the server's ids) or "text" (rebuilt from the text)
)


def schema() -> "pa.Schema":
    import pyarrow as pa

    types = {"string": pa.string(), "list<int32>": pa.list_(pa.int32()), "list<uint8>": pa.list_(pa.uint8())}
    types |= {"int32": pa.int32()}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def table(rows: dict[str, list]) -> "pa.Table":
    """A part's table from columns (an empty one keeps the schema)."""
    import pyarrow as pa

    return pa.Table.from_pydict(rows, schema=schema())


def rows_table(records: list[dict]) -> "pa.Table":
    """A part's table from row dicts holding the contract's columns (``num_tokens`` and
    ``num_supervised`` computed where a fixture leaves them out)."""
    columns: dict[str, list] = {name: [] for name, _ in COLUMNS}
    for r in records:
        full = {"num_tokens": len(r["input_ids"]), "num_supervised": sum(r["loss_mask"]), "source": "server", **r}
        for name in columns:
            columns[name].append(full[name])
    return table(columns)


def schema_problem(part: str | Path) -> str | None:
    """How the part's columns differ from the contract, or None."""
    import pyarrow.parquet as pq

    found, expected = pq.read_schema(str(part)), schema()
    if found.names != expected.names:
        return f"{part}: columns {found.names}, the contract's are {expected.names}"
    wrong = [f"{f.name} is {f.type}, not {e.type}" for f, e in zip(found, expected) if not f.type.equals(e.type)]
    return f"{part}: {'; '.join(wrong)}" if wrong else None


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
