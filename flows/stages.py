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

import dataclasses
import functools
import inspect
import typing

from prefect import Flow, flow
from pydantic import BaseModel

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
    """The stage class's first line, and every parameter's meaning (``parameter_help``)."""
    first = (load(spec.stage).__doc__ or spec.name).strip().splitlines()[0]
    args = [f"    {name}: {parameter_help(spec, p)}" for name, p in signature.parameters.items()]
    return "\n".join([first, "", "Args:", *args])


def parameter_help(spec: StageSpec, parameter: inspect.Parameter) -> str:
    """What a parameter is: the stage's own words for it (``STAGE_HELP``), the shared ones
    (``PARAMETER_HELP``), the declaration's for an input folder, else the field's description (the
    stage's dataclass field ``metadata={"description": ...}``, else its type's docstring)."""
    name = parameter.name
    said = STAGE_HELP.get((spec.name, name)) or PARAMETER_HELP.get(name)
    if said:
        return said
    from eagle3_core.config import PipelineConfig

    upstream = spec.inputs(PipelineConfig()).get(name)
    if upstream is not None:
        stage, _, inside = upstream.partition("/")
        folder = BY_NAME[stage].folder + "/" + (inside + "/" if inside else "")
        return f"The folder {stage} wrote ({folder}), read by this stage."
    field = {f.name: f for f in dataclasses.fields(load(spec.stage))}.get(name)
    if field is not None and field.metadata.get("description"):
        return field.metadata["description"]
    kinds = [k for k in typing.get_args(parameter.annotation) if k is not type(None)] or [parameter.annotation]
    if isinstance(kinds[0], type) and issubclass(kinds[0], BaseModel) and kinds[0].__doc__:
        return kinds[0].__doc__.strip().splitlines()[0]
    raise TypeError(
        f"{spec.stage}: parameter {name!r} has no description for its flow's form: give its field "
        'metadata={"description": "..."} (dataclasses.field), or add it to flows/stages.py PARAMETER_HELP'
    )


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
