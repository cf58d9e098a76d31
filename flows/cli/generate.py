"""`eagle3 generate`."""

from __future__ import annotations

import click


@click.command("generate")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 generate is not built yet")
