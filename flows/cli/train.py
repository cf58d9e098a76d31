"""`eagle3 train`."""

from __future__ import annotations

import click


@click.command("train")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 train is not built yet")
