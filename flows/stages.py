"""Each declared stage's Prefect flow: its own (``StageSpec.flow``), or one built from its body.

A built flow is named after the stage and takes exactly the body's parameters (less
``reporter``), typed as the body declares them, so the Prefect UI renders its form and validates
it as the CLI does; it runs one task, ``tasks.stage.stage_task``, that calls the body.
"""

from __future__ import annotations

import functools
import inspect
import typing

from prefect import Flow, flow

from eagle3_core.stages import BY_NAME, load


@functools.cache
def stage_flow(name: str) -> Flow:
    """The flow that runs stage ``name`` into its folder (a subflow when called from a flow)."""
    spec = BY_NAME[name]
    if spec.flow is not None:
        return load(spec.flow)
    return _flow_from_body(name, load(spec.run))


def _flow_from_body(name: str, body) -> Flow:
    hints = typing.get_type_hints(body)
    parameters = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in inspect.signature(body).parameters.values()
        if p.name != "reporter"
    ]
    signature = inspect.Signature(parameters, return_annotation=hints.get("return"))

    def run_stage_flow(*args, **kwargs):
        from tasks.stage import stage_task

        return stage_task(name, dict(signature.bind(*args, **kwargs).arguments))

    run_stage_flow.__signature__ = signature
    run_stage_flow.__doc__ = (body.__doc__ or "").strip().splitlines()[0] if body.__doc__ else None
    run_stage_flow.__module__, run_stage_flow.__qualname__ = __name__, f"{name}_flow"
    return flow(name=name, log_prints=True)(run_stage_flow)
