"""The task of a stage without its own flow: a decorator and a call into its body (``run_<name>``)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from eagle3_core.manifest import StageManifest
from eagle3_core.stages import BY_NAME, load
from tasks.common import PrefectReporter, publish_manifest


# No Prefect cache: the stage's own skip (its manifest and the sizes of its shards) costs a stat
# per shard, and a cached result would hide a deleted shard that the stage should redo.
@task(cache_policy=NO_CACHE, task_run_name="{name}")
def stage_task(name: str, arguments: dict[str, Any]) -> StageManifest:
    """Run the stage's body with a Prefect reporter; its manifest becomes the summary artifact."""
    manifest = load(BY_NAME[name].run)(**arguments, reporter=PrefectReporter(name))
    publish_manifest(manifest, title=name)
    return manifest
