"""A finished stage's figures for the run's trackers, in the three shapes every backend renders
as one thing each: scalars (one card, one point), curves (one chart, several lines over an x that is
not the training step) and tables (one text). A module of its own, so the backends and the
package's front both import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Curve:
    """One chart: ``lines`` (line name -> [(x, y)]) over an x whose values ``ticks`` name
    (``ticks[x]``: the context bucket ``0-512`` for x = 0). Line names are MLflow-safe
    (letters, digits, ``_``): each line is also a metric ``<curve>/<line>``."""

    x_label: str
    y_label: str
    ticks: list[str]
    lines: dict[str, list[tuple[int, float]]]


@dataclass
class Table:
    """One text table: ``columns``, ``rows`` of strings, and a ``note`` said above it."""

    columns: list[str]
    rows: list[list[str]]
    note: str = ""

    def markdown(self) -> str:
        head = [f"| {' | '.join(self.columns)} |", "|" + "---|" * len(self.columns)]
        body = [f"| {' | '.join(cell.replace('|', '/') for cell in row)} |" for row in self.rows]
        return "\n".join(([self.note, ""] if self.note else []) + head + body) + "\n"


@dataclass
class Figures:
    scalars: dict[str, float] = field(default_factory=dict)  # at the run's last step
    curves: dict[str, Curve] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.scalars or self.curves or self.tables)
