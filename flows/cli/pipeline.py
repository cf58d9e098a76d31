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
    config.require_prompts(config_path)
    if out is not None:
        config = config.model_copy(update={"out": out})
    run_and_report(config)


def run_and_report(config) -> dict:
    """Run the pipeline flow and print each stage's outcome, the outputs and the headline figures."""
    from eagle3_core.run_summary import summary_lines
    from flows.pipeline import pipeline

    outcomes = pipeline(config)
    click.echo("")
    for line in summary_lines(config, outcomes):
        click.echo(line)
    refuse_blocked(outcomes)
    return outcomes


def refuse_blocked(outcomes: dict) -> None:
    """A selected stage that could not run makes the command fail: exit 0 means all of it ran."""
    from eagle3_core.errors import StageError

    blocked = {name: o["reason"] for name, o in outcomes.items() if o["status"] == "blocked"}
    if blocked:
        said = "; ".join(f"{name} {reason}" for name, reason in blocked.items())
        raise StageError(
            f"{len(blocked)} selected stage(s) did not run: {said}",
            fix="add the stages they need to `stages:`, or point --out at a run that holds their output",
        )
