"""A terminal progress bar for the generate stage, fed through the ``Reporter`` protocol.

Shows done/total, in flight, rejected, rate and ETA (tqdm computes rate and ETA from ``done``).
``Fanout`` sends the same calls to several reporters (the bar and Prefect's artifact).
"""

from __future__ import annotations

import sys
from typing import Any

from eagle3_core.progress import Reporter


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
    def __init__(self, *reporters: Reporter) -> None:
        self.reporters = reporters

    def progress(self, stage: str, done: int, total: int | None, **figures: Any) -> None:
        for reporter in self.reporters:
            reporter.progress(stage, done, total, **figures)

    def log(self, message: str) -> None:
        for reporter in self.reporters:
            reporter.log(message)
