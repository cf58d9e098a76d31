"""`eagle3 serve`."""

from __future__ import annotations

import click


@click.command("serve")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("eagle3 serve is not built yet")
