"""`eagle3 extract`."""

from __future__ import annotations

import click


@click.command("extract")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 extract is not built yet")
