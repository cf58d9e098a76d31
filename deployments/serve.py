"""Serve every eagle3 deployment from one process, for teams without a work pool or worker.

    python deployments/serve.py [--recipe configs/toy.yaml] [--out runs/served]

Registers ``eagle3-pipeline`` (manual), ``eagle3-generate`` (manual, when the generate stage's
flow is built) and ``eagle3-nightly`` (cron ``0 2 * * *`` in UTC, at most one run at a time)
with the Prefect API in ``PREFECT_API_URL``, then runs their flow runs in subprocesses until
stopped (SIGTERM or Ctrl-C). Parameters come from the recipe; the Prefect UI shows them as a
form, validated by the same pydantic models as the CLI.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# An explicit time zone, so 02:00 means the same hour whatever the server's clock says.
NIGHTLY_CRON, NIGHTLY_TIMEZONE = "0 2 * * *", "UTC"


def build_deployments(recipe_path: Path, out: str) -> list:
    """One RunnerDeployment per eagle3 flow, parameters from the recipe."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.schedules import Cron

    from eagle3_core.config import PipelineConfig
    from flows.nightly import NightlyConfig, nightly
    from flows.pipeline import pipeline
    from flows.pipeline_stages import load_stage_flow

    recipe = PipelineConfig.from_yaml(recipe_path).model_copy(update={"out": out})
    deployments = [pipeline.to_deployment(
        "eagle3-pipeline", parameters={"config": recipe.model_dump(mode="json")},
        description="The whole DAG on one recipe: generate -> ... -> evaluate.", tags=["eagle3"])]
    generate_flow = load_stage_flow("generate")
    if generate_flow is not None:
        deployments.append(generate_flow.to_deployment(
            "eagle3-generate", description="Generate a dataset from the recipe's prompts and endpoints.",
            parameters={"cfg": recipe.generate.model_dump(mode="json"),
                        "out": str(recipe.layout.generations)}, tags=["eagle3"]))
    nightly_config = NightlyConfig(root=str(Path(out) / "nightly"), recipe=recipe)
    deployments.append(nightly.to_deployment(
        "eagle3-nightly", schedules=[Cron(NIGHTLY_CRON, timezone=NIGHTLY_TIMEZONE)], parameters={"config": nightly_config.model_dump(mode="json")},
        concurrency_limit=ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE),
        description="Regenerate new prompts into a dated dataset version every night.", tags=["eagle3"]))
    return deployments


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default=str(ROOT / "configs" / "toy.yaml"), help="Pipeline recipe (YAML).")
    parser.add_argument("--out", default="runs/served", help="Run directory of the served deployments.")
    args = parser.parse_args(argv)
    os.chdir(ROOT)  # entrypoints (flows/pipeline.py:pipeline) are relative to the repository root
    sys.path.insert(0, str(ROOT))
    from prefect import serve

    serve(*build_deployments(Path(args.recipe), args.out))


if __name__ == "__main__":
    main()
