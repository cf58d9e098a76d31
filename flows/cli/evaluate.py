"""`eagle3 evaluate`."""

from __future__ import annotations

import click


@click.command("evaluate")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 evaluate is not built yet")
