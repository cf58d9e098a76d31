"""Serve every eagle3 deployment from one process, for teams without a work pool or worker.

    python deployments/serve.py [--recipe configs/toy.yaml] [--out runs/served]

The deployments are the ones ``deployments/prefect.yaml`` defines for the process pool (that
file is their one definition: names, entrypoints, schedules, concurrency limits, descriptions,
tags, parameters). Here their parameters are pointed at ``--recipe`` (wherever prefect.yaml
holds the toy recipe; the generate deployment's generate and target sections where the recipe can
generate on its own, ``generate_alone``) and ``--out`` (the recipe's run directory; other
``runs/...`` paths move under it). No parameter holds a field its form leaves out (what the run fills
in). They are registered with the Prefect API in ``PREFECT_API_URL`` and their flow runs run in
subprocesses until stopped (SIGTERM or Ctrl-C).
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


def repoint(value: Any, recipes: dict, config, out: str) -> Any:
    """``value`` with prefect.yaml's toy recipe replaced by ``config`` and, where ``config`` can
    generate on its own, the generate deployment's toy sections by its generate and target sections;
    ``runs/...`` paths moved under ``out``."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.stages.generate.config import GenerateConfig
    from eagle3_core.target.config import TargetConfig

    toy = recipes["toy_recipe"]
    if value == toy:
        return form_fields(config.model_dump(mode="json"), PipelineConfig)
    if generate_alone(config) and value == recipes["toy_answers"]:
        return form_fields(config.generate.model_dump(mode="json"), GenerateConfig)
    if generate_alone(config) and value == toy["target"]:
        return form_fields(config.target.model_dump(mode="json"), TargetConfig)
    if isinstance(value, dict):
        return {k: repoint(v, recipes, config, out) for k, v in value.items()}
    if isinstance(value, str) and value.startswith(RUNS):
        return str(Path(out) / value.removeprefix(RUNS))
    return value


def generate_alone(config) -> bool:
    """Whether the recipe's generate section runs as the generate deployment's form: from its rows' own
    answers, or with its endpoints named. Otherwise (a recipe whose `serve:` serves generate in the
    pipeline) the generate flow, which starts no vLLM, keeps prefect.yaml's: the toy's own answers."""
    return config.generate.prompts is not None and (
        config.generate.source == "dataset" or bool(config.generate.base_urls)
    )


def form_fields(value: Any, model: type) -> Any:
    """``value`` (a model's JSON dump) without the fields its form's schema leaves out: those the run
    fills in itself (``SkipJsonSchema``: generate's copies of the target's settings and the served
    target's fingerprint, train's recipe hash). A form never shows a value the run overwrites, and
    Prefect refuses a parameter its form's schema does not have (409)."""
    schema = model.model_json_schema()
    return within_schema(value, schema, schema.get("$defs", {}))


def within_schema(value: Any, node: dict, definitions: dict) -> Any:
    """``value`` with every mapping cut to the properties of its schema ``node`` (``$ref`` and a
    model-or-null ``anyOf`` followed); a value whose node names no properties stays as it is."""
    if "$ref" in node:
        node = definitions[node["$ref"].split("/")[-1]]
    options = [o for o in node.get("anyOf", node.get("allOf", [])) if "$ref" in o or "properties" in o]
    if isinstance(value, dict) and "properties" not in node and len(options) == 1:  # X | None, a model
        return within_schema(value, options[0], definitions)
    properties = node.get("properties")
    if not isinstance(value, dict) or properties is None:
        return value
    return {k: within_schema(v, properties[k], definitions) for k, v in value.items() if k in properties}


def build_deployments(recipe_path: Path, out: str) -> list:
    """One RunnerDeployment per deployment prefect.yaml defines, parameters from the recipe."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.schedules import Cron

    from eagle3_core.config import PipelineConfig
    from eagle3_core.stages import load

    data = yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))
    recipes = data["definitions"]["recipes"]
    config = PipelineConfig.from_yaml(recipe_path).model_copy(update={"out": out})
    built = []
    for d in defined_deployments():
        limit = d.get("concurrency_limit")
        path, name = d["entrypoint"].split(":")  # flows/pipeline.py:pipeline -> flows.pipeline:pipeline
        built.append(
            load(f"{path.removesuffix('.py').replace('/', '.')}:{name}").to_deployment(
                d["name"],
                parameters=repoint(d["parameters"], recipes, config, out),
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
