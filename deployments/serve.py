"""Serve every eagle3 deployment from one process, for teams without a work pool or worker.

    python deployments/serve.py [--recipe configs/toy.yaml] [--out runs/served]

The deployments are the ones ``deployments/prefect.yaml`` defines for the process pool (that
file is their one definition: names, entrypoints, schedules, concurrency limits, descriptions,
tags, parameters). Here their parameters are pointed at ``--recipe`` (wherever prefect.yaml
holds the toy recipe or its generate section) and ``--out`` (the recipe's run directory; other
``runs/...`` paths move under it). They are registered with the Prefect API in
``PREFECT_API_URL`` and their flow runs run in subprocesses until stopped (SIGTERM or Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PREFECT_YAML = ROOT / "deployments" / "prefect.yaml"
PROCESS_POOL = "eagle3-process"
RUNS = "runs/"


def defined_deployments() -> list[dict[str, Any]]:
    """prefect.yaml's deployments on the process pool (the docker variants are the same flows)."""
    data = yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))
    return [d for d in data["deployments"] if d["work_pool"]["name"] == PROCESS_POOL]


def repoint(value: Any, toy: dict, config, out: str) -> Any:
    """``value`` with the toy recipe (or its generate or target section) replaced by ``config``'s,
    and ``runs/...`` paths moved under ``out``. Generate's fields the run fills in (``run_filled``:
    its copies of the target's settings, the target's fingerprint) are left out of every parameter:
    a run whose form edits target.chat is not refused over a stale copy, the form never shows a
    value the run ignores, and Prefect refuses a parameter its form's schema does not have (422)."""
    hidden = run_filled(type(config.generate))
    if value == toy:
        return config.model_dump(mode="json", exclude={"generate": hidden})
    if value == toy["generate"]:
        return config.generate.model_dump(mode="json", exclude=hidden)
    if value == toy["target"]:
        return config.target.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: repoint(v, toy, config, out) for k, v in value.items()}
    if isinstance(value, str) and value.startswith(RUNS):
        return str(Path(out) / value.removeprefix(RUNS))
    return value


def run_filled(model: type) -> set[str]:
    """The fields a run fills in itself: those its JSON schema (the form) leaves out (``SkipJsonSchema``:
    GenerateConfig's copies of the target's settings and the served target's fingerprint)."""
    return set(model.model_fields) - set(model.model_json_schema()["properties"])


def build_deployments(recipe_path: Path, out: str) -> list:
    """One RunnerDeployment per deployment prefect.yaml defines, parameters from the recipe."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.schedules import Cron

    from eagle3_core.config import PipelineConfig
    from eagle3_core.stages import load

    data = yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))
    toy = data["definitions"]["recipes"]["toy_recipe"]
    config = PipelineConfig.from_yaml(recipe_path).model_copy(update={"out": out})
    built = []
    for d in defined_deployments():
        limit = d.get("concurrency_limit")
        path, name = d["entrypoint"].split(":")  # flows/pipeline.py:pipeline -> flows.pipeline:pipeline
        built.append(
            load(f"{path.removesuffix('.py').replace('/', '.')}:{name}").to_deployment(
                d["name"],
                parameters=repoint(d["parameters"], toy, config, out),
                description=d.get("description"),  # none: the flow's own
                tags=d.get("tags", []),
                schedules=[
                    Cron(s["cron"], timezone=s["timezone"], active=s.get("active", True))
                    for s in d.get("schedules", [])
                ],
                concurrency_limit=limit
                and ConcurrencyLimitConfig(
                    limit=limit["limit"], collision_strategy=ConcurrencyLimitStrategy[limit["collision_strategy"]]
                ),
            )
        )
    return built


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default=str(ROOT / "configs" / "toy.yaml"), help="Pipeline recipe (YAML).")
    parser.add_argument("--out", default="runs/served", help="Run directory of the served deployments.")
    args = parser.parse_args(argv)
    recipe = Path(args.recipe).resolve()  # from where it was typed, before the chdir below
    os.chdir(ROOT)  # entrypoints (flows/pipeline.py:pipeline) are relative to the repository root
    sys.path.insert(0, str(ROOT))
    from prefect import serve

    serve(*build_deployments(recipe, args.out))


if __name__ == "__main__":
    main()
