"""Domain errors: each says what was expected, where, and how to fix it.

The CLI prints ``str(error)`` without a traceback for these; anything else is a bug.
"""

from __future__ import annotations


class Eagle3Error(Exception):
    """Base of every error a user can cause and fix."""

    def __init__(
        self, message: str, *, fix: str | None = None, sample_id: str | None = None, path: str | None = None
    ) -> None:
        self.message, self.fix, self.sample_id, self.path = message, fix, sample_id, path
        super().__init__(self.__str__())

    def __str__(self) -> str:
        parts = [self.message]
        if self.sample_id:
            parts.append(f"sample: {self.sample_id}")
        if self.path:
            parts.append(f"file: {self.path}")
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "\n  ".join(parts)


class ConfigError(Eagle3Error):
    """A config or command-line value is wrong."""


class InputError(Eagle3Error):
    """An input file, dataset or directory is missing or malformed."""


class EndpointError(Eagle3Error):
    """A serving endpoint is unreachable or does not behave as required."""


class StageError(Eagle3Error):
    """A stage could not finish (its own message says why)."""


class StagesBlocked(StageError):
    """Selected stages did not run because what they read was never made; ``outcomes`` holds every
    stage's outcome (``{stage: fields}``) so a caller can still report the whole run."""

    def __init__(self, message: str, *, outcomes: dict[str, dict], fix: str | None = None) -> None:
        self.outcomes = outcomes
        super().__init__(message, fix=fix)
