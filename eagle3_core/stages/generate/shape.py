"""An input whose rows match no known shape is one error before any request, never N rejects.

A Parquet file of ``question``/``answer`` columns would otherwise cost a probe and end with every
row an ``unknown_shape`` reject. The first ``SHAPE_ROWS`` rows decide: when none of them can be
a prompt and every one fails for its shape (not for a bad line or a bad value, which stay
per-row rejects), the error names the columns found and the ones wanted.
"""

from __future__ import annotations

from itertools import islice

from eagle3_core.chat.rows import RowRejection, normalize_prompt
from eagle3_core.errors import InputError
from eagle3_core.prompts.inputs import BAD_LINE, iter_rows
from eagle3_core.prompts.source import PromptSource

SHAPE_ROWS = 64  # enough to see past a few odd rows at the top; a cost of microseconds
WANTED = "`messages` (role/content turns), `conversations` (ShareGPT from/value) or `prompt` (a string)"


def check_shape(source: PromptSource) -> None:
    rows = list(islice(iter_rows(source), SHAPE_ROWS))
    verdicts = [normalize_prompt(row) for row in rows]
    if not rows or not all(_wrong_shape(row, v) for row, v in zip(rows, verdicts)):
        return
    found = sorted({str(key) for row in rows for key in row})
    raise InputError(
        f"no row of {source.input} has a known shape: the first {len(rows)} rows have the columns "
        f"{', '.join(found) or 'none'}; wanted {WANTED}",
        path=source.input,
        fix="rename the columns (e.g. a question column to `prompt`) or convert the rows to one of those shapes",
    )


def _wrong_shape(row: object, verdict: object) -> bool:
    return (
        isinstance(row, dict)
        and BAD_LINE not in row
        and isinstance(verdict, RowRejection)
        and verdict.reason == "unknown_shape"
    )
