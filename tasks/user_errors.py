"""A user's mistake (an ``Eagle3Error``) logged without Prefect's traceback of it.

Prefect logs a failed run's exception with its traceback on its task, flow and engine loggers, once
per level; for a user's mistake the error's own line and fix say everything. No Prefect import here:
the command line installs the filter before it knows whether a flow will run (``eagle3 --help``
stays quick), and the flows install it in every run (``tasks.common.failing_in_one_line``).
"""

from __future__ import annotations

import logging

from eagle3_core.errors import Eagle3Error

PREFECT_RUN_LOGGERS = ("prefect.task_runs", "prefect.flow_runs", "prefect.engine")


class DropUserErrorTraceback(logging.Filter):
    """Drops a record that carries an ``Eagle3Error`` as its exception (Prefect's traceback of it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], Eagle3Error))


def quiet_user_error_tracebacks() -> None:
    """The filter on each of Prefect's run loggers, once per process: a logger-level filter sees every
    record logged there, whatever handlers (the API's, the console's) Prefect installs later."""
    for name in PREFECT_RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropUserErrorTraceback) for f in logger.filters):
            logger.addFilter(DropUserErrorTraceback())
