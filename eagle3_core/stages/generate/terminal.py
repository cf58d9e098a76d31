"""A terminal progress bar for the generate stage, fed through the ``Reporter`` protocol.

Shows done/total, in flight, rejected, rate and ETA (tqdm computes rate and ETA from ``done``).
``Fanout`` sends the same calls to the stage's reporter of the moment and to the bar.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from eagle3_core.run.progress import Reporter

PROGRESS_ENV = "EAGLE3_PROGRESS"  # 0: no bar (the CLI's --no-progress); unset: a bar when stderr is a terminal


def wants_bar() -> bool:
    """A terminal setting, not a run's: a bar when stderr is a terminal, unless ``$EAGLE3_PROGRESS`` is 0
    (so no deployment form carries it)."""
    import os

    return os.environ.get(PROGRESS_ENV, "") != "0" and sys.stderr.isatty()


class TerminalProgress:
    def __init__(self, stream=None, echo_logs: bool = True) -> None:
        self.stream, self.echo_logs = stream or sys.stderr, echo_logs
        self._bar = None
        self._finished = False

    def progress(self, stage: str, done: int, total: int | None, **figures: Any) -> None:
        if self._finished:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=stage,
                unit="row",
                file=self.stream,
                dynamic_ncols=True,
                mininterval=0.5,
                smoothing=0.05,
            )
        self._bar.update(done - self._bar.n)
        shown = {k: v for k, v in figures.items() if k in ("in_flight", "rejected")}
        self._bar.set_postfix(shown, refresh=False)
        if total is not None and done >= total:
            self._finished = True
            self.close()

    def log(self, message: str) -> None:
        if not self.echo_logs:
            return
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            self.stream.write(message + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Fanout:
    """The same calls to ``current()``, the reporter as it is at each call (a Prefect flow gives
    each task its own, ``StageRun.report_to``), and to ``extra`` (the terminal bar)."""

    def __init__(self, current: Callable[[], Reporter], *extra: Reporter) -> None:
        self.current, self.extra = current, extra

    def progress(self, stage: str, done: int, total: int | None, **figures: Any) -> None:
        for reporter in (self.current(), *self.extra):
            reporter.progress(stage, done, total, **figures)

    def log(self, message: str) -> None:
        for reporter in (self.current(), *self.extra):
            reporter.log(message)
