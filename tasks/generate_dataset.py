"""The task of ``generate.source: dataset``: one call that takes every row's own answer."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from eagle3_core.generate.config import GenerateConfig
from eagle3_core.generate.stage import run_generate
from eagle3_core.manifest import StageManifest
from tasks.common import PrefectReporter, publish_manifest


# No Prefect cache: the stage's own skip (its manifest, the sizes of its shards) is the final word.
@task(name="generate-from-dataset", cache_policy=NO_CACHE)
def generate_from_dataset(cfg: GenerateConfig, out: str) -> StageManifest:
    manifest = run_generate(cfg, out, PrefectReporter("generate"))
    publish_manifest(manifest, title="generate")
    return manifest
