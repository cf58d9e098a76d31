"""How the core reports progress without knowing who listens.

A stage takes an optional ``Reporter``; the CLI prints a bar, a Prefect task turns the same
calls into a progress artifact. ``NullReporter`` is the default.
"""

from __future__ import annotations

from typing import Any, Protocol


class Reporter(Protocol):
    def progress(self, stage: str, done: int, total: int | None, **figures: Any) -> None:
        """``done`` of ``total`` units (rows, tokens, steps) finished; figures such as rate or in-flight."""

    def log(self, message: str) -> None:
        """One human line (the probe's verdict, a storage estimate, ...)."""


class NullReporter:
    def progress(self, stage: str, done: int, total: int | None, **figures: Any) -> None:
        return None

    def log(self, message: str) -> None:
        return None
