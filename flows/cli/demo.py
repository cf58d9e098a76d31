"""`eagle3 demo [--out DIR]`: the whole job on this machine, no GPU and no network.

Runs the pipeline on the embedded toy recipe (configs/toy.yaml): build or load the toy target,
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
@click.option("--out", default="runs/demo", show_default=True, help="Run directory.")
def command(out: str) -> None:
    """Train and evaluate a drafter for the toy reasoning target, end to end, on CPU."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.errors import ConfigError
    from flows.cli.pipeline import run_and_report

    if not TOY_RECIPE.exists():
        raise ConfigError(
            f"the toy recipe is missing: {TOY_RECIPE}",
            fix="run eagle3 demo from a checkout of the eagle3 repository (pip install -e .)",
        )
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    config = PipelineConfig.from_yaml(TOY_RECIPE).model_copy(update={"out": out})
    click.echo(f"eagle3 demo: recipe {TOY_RECIPE}, run directory {out}")
    run_and_report(config)
