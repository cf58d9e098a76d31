"""Nightly regeneration: a new dated dataset version with only what changed, optionally a drafter.

1. Ask the endpoints which model they serve (the generate stage's probe). A recipe with ``toy``
   and ``serve`` gets the toy target served by vLLM for the night, as in the pipeline.
2. Start today's version from the previous one's shards that still hold (``dataset_versions``):
   a sample's id is the hash of its prompt messages and sampling config, model included, so a
   changed model or sampling config makes every prompt new and a new prompt is new; nothing
   else is requested again.
3. Run the generate stage in the new version: its resume skips every sample a shard holds.
4. Optionally continue into reconstruct -> vocab -> extract -> train, the drafter starting from
   the last drafter's weights (``train.init_from``), recorded as trained on the new version.
5. Keep the newest ``keep_versions`` versions and every version a drafter was trained on.

Two nightly runs never run at once: the deployment has a concurrency limit of 1
(deployments/prefect.yaml, deployments/serve.py).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from pydantic import Field
from prefect import flow, get_run_logger, task

from eagle3_core.base import StrictModel
from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.generate.config import GenerateConfig
from flows import dataset_versions as dv
from flows.pipeline import served_for_generation, with_target
from flows.pipeline_stages import Outcome, load_stage_flow, run_stage


class NightlyConfig(StrictModel):
    """Where the dataset versions live, the recipe to generate (and train) with, and what to keep."""

    root: str = Field("runs/nightly", description="Dataset root: versions/<date>/ and drafters/<date>/ live under it.")
    recipe: PipelineConfig = Field(default_factory=PipelineConfig, description="The pipeline recipe: its generate section (prompts, endpoints, sampling) and, for training, target and stage sections.")
    keep_versions: int = Field(7, ge=1, description="Complete versions to keep; older ones are deleted unless a drafter was trained on them.")
    train: bool = Field(False, description="Continue into reconstruct, vocab, extract and train on the new version.")


@flow(name="nightly", log_prints=True)
def nightly(config: NightlyConfig) -> dict:
    """Regenerate what is new into a dated dataset version; optionally train; prune old versions."""
    recipe = with_target(config.recipe.model_copy(update={"out": config.root}), {})
    require_endpoints(recipe)
    with served_for_generation(recipe, {}) as served:
        generate = ask_served_model(served.generate)
        version_dir, reuse = start_version(config, generate)
        generate_into(generate, version_dir)
    finish_version(config, version_dir, generate, reuse)
    if config.train:
        train_on(config, version_dir)
    deleted = prune_versions(config)
    return {"version": version_dir.name, "reuse": vars(reuse), "deleted": deleted}


def require_endpoints(recipe: PipelineConfig) -> None:
    """A config mistake fails at once, before any retry or server start."""
    if recipe.generate.prompts is None or not (recipe.generate.base_urls or recipe.serve):
        raise ConfigError("the nightly needs recipe.generate.prompts and endpoints (recipe.generate.base_urls, "
                          "or recipe.serve to start vLLM for the target)",
                          fix="set them in the recipe the nightly deployment passes")


@task(name="ask-served-model", retries=2, retry_delay_seconds=[10, 60])
def ask_served_model(cfg: GenerateConfig) -> GenerateConfig:
    """The generate config pinned to the model the endpoints serve (the probe's verdict)."""
    from eagle3_core.generate.probe import probe_endpoints

    report = probe_endpoints(cfg)
    get_run_logger().info(report.line())
    return cfg.model_copy(update={"model": report.model})


def current_sample_ids(cfg: GenerateConfig) -> set[str]:
    """The sample id of every prompt under ``cfg``'s model and sampling config (as generate keys them)."""
    from eagle3_core.generate.inputs import iter_rows
    from eagle3_core.generate.rows import RowRejection, normalize, sample_id

    key, ids = cfg.sampling_key(), set()
    for row in iter_rows(cfg.prompts):
        messages = normalize(row)
        if not isinstance(messages, RowRejection):
            ids.add(sample_id(messages, key))
    return ids


@task(name="start-version")
def start_version(config: NightlyConfig, cfg: GenerateConfig) -> tuple[Path, dv.Reuse]:
    """Create (or resume) today's version, seeded with the previous version's current shards."""
    root = Path(config.root)
    name = dv.new_version_name(root, dt.date.today())
    version_dir = dv.versions_dir(root) / name
    previous = [v for v in dv.complete_versions(root) if v != name]
    reuse = dv.Reuse()
    if previous:
        reuse = dv.seed_from(dv.versions_dir(root) / previous[-1] / "generations",
                             version_dir / "generations", current_sample_ids(cfg))
    get_run_logger().info("version %s: %d shards reused as is, %d filtered, %d dropped (%d rows carried over)",
                          name, reuse.linked, reuse.filtered, reuse.dropped, reuse.rows)
    return version_dir, reuse


def generate_into(cfg: GenerateConfig, version_dir: Path) -> None:
    """The generate stage's own flow (a subflow): it requests only the samples no shard holds."""
    generate_flow = load_stage_flow("generate")
    if generate_flow is None:
        raise ConfigError("the generate stage is not built yet", fix="the nightly needs flows/generate.py")
    generate_flow(cfg=cfg, out=str(version_dir / "generations"))


def finish_version(config: NightlyConfig, version_dir: Path, cfg: GenerateConfig, reuse: dv.Reuse) -> None:
    from eagle3_core.manifest import read_manifest

    manifest = read_manifest(version_dir / "generations")
    dv.mark_complete(version_dir, {
        "version": version_dir.name, "created_at": time.time(), "model": cfg.model,
        "sampling": cfg.sampling_key(), "reuse": vars(reuse),
        "counts": dict(manifest.counts) if manifest else {}})


def train_on(config: NightlyConfig, version_dir: Path) -> None:
    """reconstruct -> vocab -> extract -> train on the new version; the drafter goes to drafters/<version>."""
    root, logger = Path(config.root), get_run_logger()
    recipe = with_target(config.recipe.model_copy(update={"out": str(version_dir)}), {})
    previous = dv.latest_drafter(root)
    if previous is not None:
        recipe = recipe.model_copy(update={"train": recipe.train.model_copy(update={"init_from": str(previous)})})
        logger.info("training starts from the weights of %s", previous)
    outcomes: dict[str, Outcome] = {}
    for name in ("reconstruct", "vocab", "extract", "train"):
        outcome = run_stage(name, recipe, outcomes)
        if outcome.status in ("not built", "blocked"):
            raise ConfigError(f"cannot train on {version_dir.name}: {name} is {outcome.status} ({outcome.reason})")
    drafter = dv.drafters_dir(root) / version_dir.name
    drafter.parent.mkdir(parents=True, exist_ok=True)
    if drafter.exists():
        import shutil

        shutil.rmtree(drafter)
    (version_dir / "drafter").rename(drafter)
    dv.mark_trained_on(drafter, version_dir.name)


@task(name="prune-versions")
def prune_versions(config: NightlyConfig) -> list[str]:
    deleted = dv.prune(config.root, config.keep_versions)
    if deleted:
        get_run_logger().info("deleted old versions: %s", ", ".join(deleted))
    return deleted
