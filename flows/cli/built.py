"""The command of a declared stage that has no ``flows/cli/<name>.py``, built from its declaration
and its config model: ``eagle3 <name> --<input> DIR ... --out DIR [--target PATH] [--<field> ...]``.

Each input argument of the declaration is a required folder option (``sequences_dir`` ->
``--sequences``); each scalar field of the stage's config (the type of its ``cfg`` parameter) is an
option built by ``options.field_option``. It runs the stage's flow and prints its manifest's counts.
"""

from __future__ import annotations

import typing

import click

from flows.cli.options import field_option, folder_option, run_stage

SCALARS = (int, float, str, bool)


def stage_command(name: str) -> click.Command:
    from eagle3_core.config import PipelineConfig
    from eagle3_core.stages import BY_NAME, load

    spec = BY_NAME[name]
    stage = load(spec.stage)
    hints = typing.get_type_hints(stage.__init__)
    model = spec.config_model
    folders = list(spec.inputs(PipelineConfig()))
    params = [_built(folder_option(_flag(argument), argument, f"{argument} folder.")) for argument in folders]
    params.append(_built(folder_option("--out", "out_dir", f"{spec.folder}/ folder to write.")))
    if "target" in hints:
        params.append(_built(folder_option("--target", None, "Local directory of the target model.", required=False)))
    fields = [f for f, info in model.model_fields.items() if _scalar(info.annotation)]
    params += [_built(field_option(model, field)) for field in fields]

    def callback(**given):
        from eagle3_core.target.config import TargetConfig

        arguments = {k: given.pop(k) for k in [*folders, "out_dir"]}
        if "target" in hints:
            arguments["target"] = TargetConfig(path=given.pop("target"))
        manifest = run_stage(name, cfg=model(**given), **arguments)
        counts = ", ".join(f"{k} {v}" for k, v in manifest.counts.items())
        click.echo(f"{name}: {manifest.status}; {counts} -> {arguments['out_dir']}")

    doc = (stage.__doc__ or "").strip().splitlines()
    return click.Command(name, params=params, callback=callback, help=doc[0] if doc else None)


def _flag(argument: str) -> str:
    return "--" + argument.removesuffix("_dir").replace("_", "-")


def _scalar(annotation) -> bool:
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return len(kinds) == 1 and (kinds[0] in SCALARS or typing.get_origin(kinds[0]) is typing.Literal)


def _built(decorator) -> click.Option:
    """The click.Option a ``click.option`` decorator would attach."""

    def holder():
        return None

    decorator(holder)
    return holder.__click_params__[0]
