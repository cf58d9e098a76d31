"""The tasks of every stage built from its declaration: a decorator and a call into the driver.

A stage without units runs in one task named after it. A stage whose declaration names a ``unit``
runs ``<name>-plan``, one ``<name>-<unit>`` task per unit (run name ``<name>-<unit>-00000``), each
holding a slot of the declared ``unit_limit`` when there is one, ``<name>-release`` and
``<name>-finish``. A stage that states serving endpoints (``Stage.endpoints()``) is given its share
of each one's global concurrency limit once it is built (``tasks/endpoints.py``), whichever stage it
is. A stage's own Prefect part is a hook in ``tasks/<name>.py`` where it has one:
``publish(stage, manifest)``, its own artifacts beside the manifest's ``<name>-summary``.

No Prefect cache on any of them: the stage's own skip (its manifest and the sizes of its shards)
costs a stat per shard, and a cached result would hide a deleted shard that the stage should redo.
"""

from __future__ import annotations

import importlib
import importlib.util
import socket
from collections.abc import Callable
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.states import State

from eagle3_core.run.driver import Stage, StageRun, drive
from eagle3_core.run.manifest import StageManifest
from eagle3_core.stages import StageSpec, load
from tasks.common import PrefectReporter, ensure_limit, failing_in_one_line, publish_manifest
from tasks.endpoints import share_endpoints
from tasks.toy import with_toy_dir


def run_declared(spec: StageSpec, arguments: dict[str, Any]) -> StageManifest | State:
    """The body of a built flow (``flows.stages``): ``{toy}`` in its arguments expanded (a deployment's
    form cannot know the toy's directory), a user's mistake failing the run in its one line."""
    return failing_in_one_line(run_units, spec, arguments)


def run_units(spec: StageSpec, arguments: dict[str, Any]) -> StageManifest:
    """The stage in one task, or its plan, a task per unit, release and finish."""
    arguments = with_toy_dir(arguments)
    if spec.unit is None:
        return whole_task.with_options(name=spec.name)(spec, arguments)
    run = plan_task.with_options(name=f"{spec.name}-plan")(spec, arguments)
    if isinstance(run, StageManifest):
        return run
    limit = spec.unit_limit.format(host=socket.gethostname()) if spec.unit_limit else None
    if limit:
        ensure_limit(limit, slots=1)
    unit = unit_task.with_options(
        name=f"{spec.name}-{spec.unit}", task_run_name=f"{spec.name}-{spec.unit}-{{index:05d}}"
    )
    try:
        for index in range(len(run.units)):  # in turn: the units share what the stage loaded
            unit(run, index, limit)
    finally:
        release_task.with_options(name=f"{spec.name}-release")(run)
    return finish_task.with_options(name=f"{spec.name}-finish")(run)


def stage_of(spec: StageSpec, arguments: dict[str, Any]) -> Stage:
    """The stage built from the flow's arguments, given its endpoints' limits."""
    stage = load(spec.stage)(**arguments, reporter=PrefectReporter(spec.name))
    share_endpoints(stage)
    return stage


@task(cache_policy=NO_CACHE)
def whole_task(spec: StageSpec, arguments: dict[str, Any]) -> StageManifest:
    """The stage whole, then its artifacts."""
    stage = stage_of(spec, arguments)
    manifest = drive(stage)
    publish(spec.name, stage, manifest)
    return manifest


@task(cache_policy=NO_CACHE)
def plan_task(spec: StageSpec, arguments: dict[str, Any]) -> StageRun | StageManifest:
    """Keys, lock, skip, plan: the complete manifest when there is nothing to do, else the open run."""
    run = StageRun(stage_of(spec, arguments))
    done = run.open()
    if done is not None:
        publish(spec.name, run.stage, done)
    return run if done is None else done


@task(cache_policy=NO_CACHE)
def unit_task(run: StageRun, index: int, limit: str | None) -> None:
    """One unit (a finished one is skipped by the stage), holding a slot of ``limit``."""
    from contextlib import nullcontext

    from prefect.concurrency.sync import concurrency

    run.report_to(PrefectReporter(run.stage.name))
    with concurrency(limit, occupy=1, strict=True) if limit else nullcontext():
        run.run(run.units[index])


@task(cache_policy=NO_CACHE)
def release_task(run: StageRun) -> None:
    """Free what the units held (GPU memory, a vLLM worker), error or not."""
    run.close()


@task(cache_policy=NO_CACHE)
def finish_task(run: StageRun) -> StageManifest:
    """The stage's figures, ``complete`` last, then the artifacts."""
    run.report_to(PrefectReporter(run.stage.name))
    manifest = run.finish()
    publish(run.stage.name, run.stage, manifest)
    return manifest


def publish(name: str, stage: Stage, manifest: StageManifest) -> None:
    """The summary artifact, and the stage's own (``tasks/<name>.py``: ``publish(stage, manifest)``)."""
    publish_manifest(manifest, title=name)
    own = own_hook(name, "publish")
    if own is not None:
        own(stage, manifest)


def own_hook(name: str, hook: str) -> Callable | None:
    """``tasks/<name>.py``'s function ``hook``, where the stage has that module and it that function."""
    if importlib.util.find_spec(f"tasks.{name}") is None:
        return None
    return getattr(importlib.import_module(f"tasks.{name}"), hook, None)
