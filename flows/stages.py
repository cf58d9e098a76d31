"""Each declared stage's Prefect flow, built from its declaration and its stage class.

A built flow is named after the stage and takes exactly the stage class's parameters (less
``reporter``), typed as the class declares them, so the Prefect UI renders its form and validates
it as the CLI does. It runs the stage through the one driver (``lifecycle.StageRun``): in one task
named after the stage, or, where the declaration names a ``unit``, in a task per unit between a
plan task and a finish task (``tasks.stage``). Only a stage that names a flow of its own
(``StageSpec.flow``: generate) is not built here.
"""

from __future__ import annotations

import functools
import inspect
import typing

from prefect import Flow, flow

from eagle3_core.stages import BY_NAME, StageSpec, load


@functools.cache
def stage_flow(name: str) -> Flow:
    """The flow that runs stage ``name`` into its folder (a subflow when called from a flow)."""
    spec = BY_NAME[name]
    if spec.flow is not None:
        return load(spec.flow)
    return build_flow(spec)


def stage_parameters(spec: StageSpec) -> inspect.Signature:
    """The stage class's parameters, less ``self`` and ``reporter``, with their resolved types."""
    init = load(spec.stage).__init__
    hints = typing.get_type_hints(init)
    parameters = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in inspect.signature(init).parameters.values()
        if p.name not in ("self", "reporter")
    ]
    from eagle3_core.manifest import StageManifest

    return inspect.Signature(parameters, return_annotation=StageManifest)


def build_flow(spec: StageSpec) -> Flow:
    signature = stage_parameters(spec)

    def run_stage_flow(*args, **kwargs):
        from tasks.stage import run_declared

        return run_declared(spec, dict(signature.bind(*args, **kwargs).arguments))

    run_stage_flow.__signature__ = signature
    run_stage_flow.__doc__ = (load(spec.stage).__doc__ or "").strip().splitlines()[0] or None
    run_stage_flow.__module__ = __name__
    run_stage_flow.__qualname__ = f"{spec.name}_flow"
    return flow(name=spec.name, log_prints=True)(run_stage_flow)
