"""The `eagle3` command line. Each command runs its Prefect flow.

Only click is imported at module level, so `eagle3 --help` is instant; a command imports its
flow (and with it Prefect, torch, ...) when it runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from eagle3_core.stages import STAGE_NAMES


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="eagle3")
def cli() -> None:
    """Train an EAGLE-3 drafter on a reasoning model's own outputs."""


# The declared stages' own commands (flows/cli/<stage>.py, for a stage useful alone), in DAG
# order, then the other commands.
for name in (*STAGE_NAMES, "pipeline", "demo", "serve", "probe"):
    if importlib.util.find_spec(f"flows.cli.{name}") is not None:
        cli.add_command(importlib.import_module(f"flows.cli.{name}").command)


def main() -> None:
    """Console entry point: a user's error is one clear message and exit 2, never a traceback."""
    from eagle3_core.errors import Eagle3Error

    quiet_user_error_tracebacks()
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Eagle3Error as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


def quiet_user_error_tracebacks() -> None:
    """Prefect logs a failed run's traceback; for a user's mistake (an ``Eagle3Error``) keep its
    one-line state message only: ``main`` prints the error and its fix itself, last."""
    import logging

    from eagle3_core.errors import Eagle3Error

    class DropUserErrorTraceback(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if record.exc_info and isinstance(record.exc_info[1], Eagle3Error):
                record.exc_info, record.exc_text = None, None
            return True

    # Prefect logs a run's failure on these loggers; a logger-level filter sees every record
    # logged there, whatever handlers Prefect installs later.
    for name in ("prefect.task_runs", "prefect.flow_runs", "prefect.engine"):
        logging.getLogger(name).addFilter(DropUserErrorTraceback())
