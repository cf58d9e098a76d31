"""`eagle3 vocab`."""

from __future__ import annotations

import click


@click.command("vocab")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 vocab is not built yet")
