"""`eagle3 demo [--recipe FILE] [--out DIR]`: the whole job on this machine, no GPU and no network.

Runs the pipeline on an embedded toy recipe (configs/toy.yaml, or configs/toy-long.yaml for
2K-8K tokens of reasoning): build or load the toy target,
serve it with real vLLM on CPU for generation, then every declared stage. A second run
reuses what the first finished (each stage checks its manifest; the toy target is cached).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

TOY_RECIPE = Path(__file__).resolve().parents[2] / "configs" / "toy.yaml"
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}


@click.command("demo")
@click.option(
    "--recipe",
    type=click.Path(dir_okay=False, path_type=Path),
    default=TOY_RECIPE,
    show_default="configs/toy.yaml",
    help="A recipe with a `toy:` section (configs/toy-long.yaml: the long-reasoning toy).",
)
@click.option("--out", default=None, help="Run directory.  [default: runs/demo, or runs/demo-<recipe name>]")
def command(recipe: Path, out: str | None) -> None:
    """Train and evaluate a drafter for the toy reasoning target, end to end, on CPU."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.errors import ConfigError
    from flows.cli.pipeline import run_and_report

    if not recipe.exists():
        raise ConfigError(
            f"the toy recipe is missing: {recipe}",
            fix="run eagle3 demo from a checkout of the eagle3 repository (pip install -e .)",
        )
    config = PipelineConfig.from_yaml(recipe)
    if config.toy is None:
        raise ConfigError(
            f"{recipe} has no `toy:` section: the demo builds its own target",
            fix="pass configs/toy.yaml or configs/toy-long.yaml, or run `eagle3 pipeline --config` for a served target",
        )
    out = out or ("runs/demo" if recipe.resolve() == TOY_RECIPE else f"runs/demo-{recipe.stem}")
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    click.echo(f"eagle3 demo: recipe {recipe}, run directory {out}")
    run_and_report(config.model_copy(update={"out": out}))
