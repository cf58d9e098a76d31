"""drafter/metrics.jsonl: one JSON object a line, each with its ``step``; a line a kill cut short
can only be the last one. The trainer writes it (``train.metrics.MetricsLog``); evaluate reads how
far the run went, to log its figures at that step of the same tracked run."""

from __future__ import annotations

import json
from pathlib import Path


def line_step(line: str) -> int | None:
    """The step of a metrics line, or None for a blank line or one cut short."""
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None


def last_step(path: str | Path) -> int:
    """The highest step in the file (-1 for none or no file): how far a run, killed or not, reported."""
    path = Path(path)
    if not path.exists():
        return -1
    return max((n for l in path.read_text().splitlines() if (n := line_step(l)) is not None), default=-1)
