"""`eagle3 pipeline`."""

from __future__ import annotations

import click


@click.command("pipeline")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 pipeline is not built yet")
