"""The `eagle3` command line. Each command runs its Prefect flow.

Only click is imported at module level, so `eagle3 --help` is instant; a command imports its
flow (and with it Prefect, torch, ...) when it runs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import sys

import click

from eagle3_core.stages import STAGE_NAMES


class StageCommands(click.Group):
    """The commands below, plus one built from its declaration (``built.stage_command``) for a
    declared stage without a ``flows/cli/<name>.py`` of its own."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.commands, *(n for n in STAGE_NAMES if n not in self.commands)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands or name not in STAGE_NAMES:
            return self.commands.get(name)
        from flows.cli.built import stage_command

        return stage_command(name)


@click.group(cls=StageCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="eagle3")
@click.option(
    "--verify",
    is_flag=True,
    help="Check every shard's full checksum (not only its size) before a stage "
    "skips or reads it; the same as EAGLE3_VERIFY=1.",
)
def cli(verify: bool) -> None:
    """Train an EAGLE-3 drafter on a reasoning model's own outputs."""
    if verify:
        os.environ["EAGLE3_VERIFY"] = "1"  # read by every stage and reader of this run (eagle3_core.run.checksums)


# The declared stages' own commands (flows/cli/<stage>.py, for a stage useful alone), in DAG
# order, then the other commands.
for name in (*STAGE_NAMES, "pipeline", "demo", "serve", "probe"):
    if importlib.util.find_spec(f"flows.cli.{name}") is not None:
        cli.add_command(importlib.import_module(f"flows.cli.{name}").command)


def main() -> None:
    """Console entry point: a user's error is one clear message and exit 2, never a traceback."""
    from eagle3_core.errors import Eagle3Error
    from tasks.user_errors import quiet_user_error_tracebacks

    quiet_user_error_tracebacks()
    try:
        with watch_ephemeral_api():
            cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Eagle3Error as exc:
        # Prefect's ephemeral API logs its shutdown at exit, on `prefect` itself: the error comes last
        # (a logger's filter sees only its own records, so the runs' loggers below it keep theirs)
        logging.getLogger("prefect").addFilter(lambda record: record.levelno >= logging.WARNING)
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


# A cold ephemeral API imports Prefect's server and opens its database: 11 s on an idle 2-core
# VM, and past Prefect's 20 s default while the command's own imports shared the cores.
EPHEMERAL_STARTUP_S = 120


def watch_ephemeral_api() -> contextlib.AbstractContextManager:
    """Without ``PREFECT_API_URL`` a flow run starts Prefect's ephemeral API as a plain child
    process, which a ``kill -9`` of the command left serving (and holding its port and database)
    for good. Started through the engines' watchdog instead, it dies with the command; and as
    ``tasks.ephemeral_api``'s app, it keeps slot leases in files and sweeps the expired ones, so a
    killed run's slots come back a lease and a sweep after it died (Prefect's own ephemeral API
    kept them leased for good). Returns the settings to run under: the ephemeral API given
    ``EPHEMERAL_STARTUP_S`` to answer (or the user's longer timeout)."""
    if os.environ.get("PREFECT_API_URL") or "--help" in sys.argv or len(sys.argv) < 2:
        return contextlib.nullcontext()  # a server of the user's, or no flow to run: --help stays quick
    import subprocess
    import types

    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    if PREFECT_API_URL.value():  # set in the user's Prefect profile
        return contextlib.nullcontext()
    from prefect.server.api import server

    from eagle3_core.serve.process import WatchedPopen
    from tasks.ephemeral_api import ephemeral_command

    def ephemeral_popen(args: list[str], env: dict[str, str], **popen) -> subprocess.Popen:
        args, env = ephemeral_command(args, env)
        # its telemetry heartbeat raced the run for the SQLite database: a 200-line "database is
        # locked" traceback at the start of every command run without a Prefect API of the user's
        env = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", **env}
        return WatchedPopen(args, env=env, **popen)

    # The module calls `subprocess.Popen` and catches `subprocess.TimeoutExpired`, nothing else of it.
    server.subprocess = types.SimpleNamespace(Popen=ephemeral_popen, TimeoutExpired=subprocess.TimeoutExpired)
    timeout = max(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value(), EPHEMERAL_STARTUP_S)
    return temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: timeout})
