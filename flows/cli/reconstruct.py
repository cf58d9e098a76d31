"""`eagle3 reconstruct`."""

from __future__ import annotations

import click


@click.command("reconstruct")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 reconstruct is not built yet")
