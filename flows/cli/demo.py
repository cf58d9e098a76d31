"""`eagle3 demo`."""

from __future__ import annotations

import click


@click.command("demo")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 demo is not built yet")
