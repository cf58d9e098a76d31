"""Each declared stage's Prefect flow, built from its declaration and its stage class.

A built flow is named after the stage and takes exactly the stage class's parameters (less
``reporter``), typed as the class declares them, so the Prefect UI renders its form and validates
it as the CLI does. It runs the stage through the one driver (``driver.StageRun``): in one task
named after the stage, or, where the declaration names a ``unit``, in a task per unit between a
plan task and a finish task (``tasks.stage``), with the stage's own hooks (``tasks/<name>.py``).

A deployment's entrypoint names a built flow as ``flows/stages.py:<name>_flow`` (the module's
``__getattr__`` builds it): the file and name Prefect itself records for a served flow.
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
    return build_flow(BY_NAME[name])


def __getattr__(attribute: str) -> Flow:
    """``generate_flow`` -> stage ``generate``'s flow (a deployment's entrypoint)."""
    name = attribute.removesuffix("_flow")
    if attribute.endswith("_flow") and name in BY_NAME:
        return stage_flow(name)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


def stage_parameters(spec: StageSpec) -> inspect.Signature:
    """The stage class's parameters, less ``self`` and ``reporter``, with their resolved types."""
    init = load(spec.stage).__init__
    hints = typing.get_type_hints(init)
    parameters = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in inspect.signature(init).parameters.values()
        if p.name not in ("self", "reporter")
    ]
    from eagle3_core.run.manifest import StageManifest

    return inspect.Signature(parameters, return_annotation=StageManifest)


# What each stage-flow parameter is, for the deployment forms (Prefect reads a Google-style "Args:"
# section of the flow's docstring); one meaning a name, whichever stage takes it
PARAMETER_HELP = {
    "cfg": "The stage's settings: the recipe's section of the stage's name.",
    "out_dir": "The stage's output folder (its manifest and shards): a rerun into it resumes, or skips when complete.",
    "target": "The target model (the recipe's target: section): its local folder and chat family.",
    "generations_dir": "The folder generate wrote (generations/), read by this stage.",
    "sequences_dir": "The folder reconstruct wrote (sequences/), read by this stage.",
    "hidden_dir": "The folder extract wrote (hidden/); null when training online (no stored states).",
    "vocab_dir": "The folder vocab wrote (vocab/): the draft vocabulary.",
    "export_dir": "The trained drafter's export folder (drafter/export/) to evaluate.",
    "serve": "How evaluate starts vLLM for the target (the recipe's serve: section); null = the defaults.",
}
STAGE_HELP = {  # where a stage uses a parameter for less than its name says
    ("generate", "target"): "The target model (the recipe's target: section): with a local target.path, the "
    "pre-flight checks each endpoint's token ids against it before the first prompt; null = no pre-flight.",
}


def flow_docstring(spec: StageSpec, signature: inspect.Signature) -> str:
    """The stage class's first line, and every parameter's meaning (``PARAMETER_HELP``)."""
    first = (load(spec.stage).__doc__ or spec.name).strip().splitlines()[0]
    args = [f"    {name}: {STAGE_HELP.get((spec.name, name)) or PARAMETER_HELP[name]}" for name in signature.parameters]
    return "\n".join([first, "", "Args:", *args])


def build_flow(spec: StageSpec) -> Flow:
    signature = stage_parameters(spec)

    def run_stage_flow(*args, **kwargs):
        from tasks.stage import run_declared

        return run_declared(spec, dict(signature.bind(*args, **kwargs).arguments))

    run_stage_flow.__signature__ = signature
    run_stage_flow.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {
        "return": signature.return_annotation
    }  # typing.get_type_hints reads these, not the signature
    run_stage_flow.__doc__ = flow_docstring(spec, signature)
    run_stage_flow.__module__ = __name__
    run_stage_flow.__qualname__ = f"{spec.name}_flow"
    return flow(name=spec.name, log_prints=True)(run_stage_flow)
