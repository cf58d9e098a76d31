"""`eagle3 pipeline --config FILE.yaml`: run the whole DAG from a recipe, then say what it made.

Like every eagle3 command it runs a Prefect flow: with ``PREFECT_API_URL`` set the run appears in
that server's UI; otherwise Prefect starts an ephemeral local API for the run and stops it after.
"""

from __future__ import annotations

import click

from eagle3_core.stages import STAGE_NAMES


@click.command("pipeline", help=f"Run {' -> '.join(STAGE_NAMES)} from a recipe.")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="A recipe (YAML of the pipeline config), e.g. configs/toy.yaml.",
)
@click.option("--out", default=None, help="Run directory; overrides the recipe's `out`.")
def command(config_path: str, out: str | None) -> None:
    from eagle3_core.config import PipelineConfig

    config = PipelineConfig.from_yaml(config_path)
    config.require_runnable(config_path)  # the toy fills target.path in the flow
    if out is not None:
        config = config.model_copy(update={"out": out})
    run_and_report(config)


def run_and_report(config) -> dict:
    """Run the pipeline flow and print each stage's outcome, the outputs and the headline figures;
    a run with blocked stages prints them too, then fails the command (exit 0 means all of it ran)."""
    from eagle3_core.errors import StagesBlocked
    from flows.pipeline import pipeline

    try:
        outcomes = pipeline(config)
    except StagesBlocked as blocked:
        report(config, blocked.outcomes)
        raise
    report(config, outcomes)
    return outcomes


def report(config, outcomes: dict) -> None:
    from eagle3_core.run.summary import summary_lines

    click.echo("")
    for line in summary_lines(config, outcomes):
        click.echo(line)
