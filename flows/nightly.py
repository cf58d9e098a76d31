"""Nightly regeneration: a new dated dataset version with only what changed, optionally a drafter.

1. Ask the endpoints which model they serve (the generate stage's probe). A recipe with ``toy``
   and ``serve`` gets the toy target served by vLLM for the night, as in the pipeline.
2. Start today's version from the previous one's shards that still hold (``nightly.versions``):
   a sample's id is the hash of its prompt messages and sampling config, model included (a served
   target's bytes, else the endpoints' served name), so a changed model or sampling config makes
   every prompt new and a new prompt is new; nothing else is requested again.
3. Run the generate stage in the new version: its resume skips every sample a shard holds.
4. Optionally continue into reconstruct -> vocab -> extract -> train, the drafter starting from
   the last drafter's weights (``train.init_from``), recorded as trained on the new version.
5. Keep the newest ``keep_versions`` versions and every version a drafter was trained on.
6. Leave a ``nightly-summary`` artifact on the run's page (``eagle3_core/nightly/summary.py``):
   the version written, the served model, prompts new / reused / rejected / open, versions kept
   and pruned, the drafter's folder and held-out acceptance when one was trained.

Two nightly runs never run at once: the deployment has a concurrency limit of 1
(deployments/prefect.yaml).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from prefect import flow, get_run_logger
from pydantic import Field, ValidationError

from eagle3_core.base import StrictModel
from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.nightly import versions as dv
from eagle3_core.nightly.summary import nightly_facts, nightly_markdown
from eagle3_core.recipe_file import format_validation_error
from eagle3_core.run.summary import Outcome
from eagle3_core.stages import BY_NAME, STAGES, upstream_of
from eagle3_core.stages.generate.config import GenerateConfig
from flows.pipeline import run_stage, served_for, settled, with_served_model, with_target
from flows.stages import stage_flow
from tasks.common import failing_in_one_line
from tasks.nightly import ask_served_model, prune_versions, start_version

TRAINED = "train"  # the stage the nightly continues to; every stage it reads except generate runs first


class NightlyConfig(StrictModel):
    """Where the dataset versions live, the recipe to generate (and train) with, and what to keep."""

    root: str = Field(
        "runs/nightly", description="Dataset root: `versions/<date>/` and `drafters/<date>/` live under it."
    )
    recipe: PipelineConfig = Field(
        default_factory=PipelineConfig,
        description="The pipeline recipe: its generate section (prompts, endpoints, sampling) and, for training, target and stage sections.",
    )
    keep_versions: int = Field(
        7, ge=1, description="Complete versions to keep; older ones are deleted unless a drafter was trained on them."
    )
    train: bool = Field(False, description="Continue into reconstruct, vocab, extract and train on the new version.")


# validated in the body, as the pipeline's: a form that breaks a rule fails with the config's one-line
# error naming the field (Prefect's refusal said "Validation of flow parameters failed ...")
@flow(name="nightly", log_prints=True, validate_parameters=False)
def nightly(config: NightlyConfig) -> dict:
    """Regenerate what is new into a dated dataset version; optionally train; prune old versions.

    Args:
        config: The dataset root, the recipe to generate (and train) with, how many versions to keep, and
            whether to train a drafter on the new version.
    """
    return failing_in_one_line(regenerate, config)


def regenerate(config: NightlyConfig | dict) -> dict:
    """The night's steps 1-6 (the module's docstring)."""
    config = validated(config)
    recipe = with_target(config.recipe.model_copy(update={"out": config.root}), {})
    require_endpoints(recipe)
    recipe = with_served_model(recipe)  # a served target is keyed by its bytes, as in the pipeline
    with served_for(BY_NAME["generate"], recipe, {}) as served:
        generate = ask_served_model(served.generate)
        version_dir, reuse = start_version(config.root, generate)
        generate_into(generate, version_dir)
    finish_version(version_dir, generate, reuse)
    drafter = train_on(config, version_dir) if config.train else None
    deleted = prune_versions(config.root, config.keep_versions)
    facts = nightly_facts(config.root, version_dir.name, generate.model, deleted, drafter)
    publish_nightly(facts)
    return {"version": version_dir.name, "reuse": vars(reuse), "deleted": deleted, "summary": facts}


def validated(config: NightlyConfig | dict) -> NightlyConfig:
    """The flow's parameter as a ``NightlyConfig``; a form's values that are not one are one
    ``ConfigError`` (one line per problem, each naming its dotted field)."""
    if isinstance(config, NightlyConfig):
        return config
    try:
        return NightlyConfig.model_validate(config)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


def publish_nightly(facts: dict) -> None:
    """The run's `nightly-summary` artifact: the version written, the served model, prompts new /
    reused / rejected / open, versions kept and pruned, the drafter when one was trained."""
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(
        nightly_markdown(facts), key="nightly-summary", description=f"eagle3 nightly version {facts['version']}"
    )


def require_endpoints(recipe: PipelineConfig) -> None:
    """A config mistake fails at once, before any retry or server start."""
    if recipe.generate.prompts is None or not (recipe.generate.base_urls or recipe.serve):
        raise ConfigError(
            "the nightly needs recipe.generate.prompts and endpoints (recipe.generate.base_urls, "
            "or recipe.serve to start vLLM for the target)",
            fix="set them in the recipe the nightly deployment passes",
        )


def generate_into(cfg: GenerateConfig, version_dir: Path) -> None:
    """The generate stage's flow (a subflow): it requests only the samples no shard holds."""
    stage_flow("generate")(cfg=cfg, out_dir=str(version_dir / "generations"))


def finish_version(version_dir: Path, cfg: GenerateConfig, reuse: dv.Reuse) -> None:
    from eagle3_core.run.manifest import read_manifest

    manifest = read_manifest(version_dir / "generations")
    dv.mark_complete(
        version_dir,
        {
            "version": version_dir.name,
            "created_at": time.time(),
            "model": cfg.model,
            "sampling": cfg.sampling_key(),
            "reuse": vars(reuse),
            "counts": dict(manifest.counts) if manifest else {},
        },
    )


def train_on(config: NightlyConfig, version_dir: Path) -> Path:
    """The stages train reads (less generate) and train, on the new version; the drafter goes to
    drafters/<version>, its folder returned."""
    root, logger = Path(config.root), get_run_logger()
    recipe = with_target(config.recipe.model_copy(update={"out": str(version_dir)}), {})
    previous = dv.latest_drafter(root)
    if previous is not None:
        recipe = recipe.model_copy(update={"train": recipe.train.model_copy(update={"init_from": str(previous)})})
        logger.info("training starts from the weights of %s", previous)
    outcomes: dict[str, Outcome] = {}
    results: dict = {}
    for spec in STAGES:
        recipe = settled(spec, recipe)  # train.mode auto, once sequences/ exist: as the pipeline does
        if spec.name == "generate" or spec.name not in [*upstream_of(TRAINED, recipe), TRAINED]:
            continue
        outcome = run_stage(spec.name, recipe, outcomes, results)
        if outcome.status == "blocked":
            raise ConfigError(f"cannot train on {version_dir.name}: {spec.name} is blocked ({outcome.reason})")
    drafter = dv.drafters_dir(root) / version_dir.name
    drafter.parent.mkdir(parents=True, exist_ok=True)
    if drafter.exists():
        shutil.rmtree(drafter)
    (version_dir / "drafter").rename(drafter)
    dv.mark_trained_on(drafter, version_dir.name)
    return drafter
