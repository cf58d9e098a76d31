"""Click options built from the config model, so a parameter is stated once: in its config field.

``field_option(TrainConfig, "lr")`` is ``--lr`` with the field's default, its description as the
help, and its type and bounds as the click type (``ge=1`` -> ``IntRange(min=1)``, ``gt=0`` ->
``FloatRange(min=0, min_open=True)``, a ``Literal`` -> ``Choice``, a bool -> a flag). Only
``click``, ``typing`` and ``annotated_types`` are imported here (the config classes come from the
caller), so ``eagle3 --help`` stays quick.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import annotated_types
import click


def field_option(model: type, field: str, *decls: str, **overrides: Any):
    """The option for ``model.field`` (``--field-name`` unless ``decls`` name it otherwise; the
    parameter is ``field`` unless ``decls`` hold a name without dashes)."""
    info = model.model_fields[field]
    decls = decls or (f"--{field.replace('_', '-')}",)
    kind = _plain(info.annotation)
    settings: dict[str, Any] = {"help": info.description}
    if info.is_required():
        settings["required"] = True  # a field without a default is an option without one
    else:
        settings["default"] = info.get_default(call_default_factory=True)
    if kind is bool and not any("/" in d for d in decls):
        settings["is_flag"] = True  # --x/--no-x is a bool option click reads from the slash
    elif kind is not bool:
        settings["type"] = click_type(kind, info.metadata)
    if settings.get("default") not in (None, []) and not settings.get("is_flag"):
        settings["show_default"] = True
    named = any(not d.startswith("-") for d in decls)  # the caller named the parameter itself
    return click.option(*decls, *(() if named else (field,)), **{**settings, **overrides})


def _plain(annotation: Any) -> Any:
    """``int | None`` -> ``int``: None is the default's business, not the type's."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else str
    return annotation


def click_type(kind: Any, metadata: list) -> Any:
    if typing.get_origin(kind) is typing.Literal:
        return click.Choice([str(v) for v in typing.get_args(kind)])
    bounds = {type(m): m for m in metadata if isinstance(m, annotated_types.BaseMetadata)}
    low = bounds.get(annotated_types.Ge) or bounds.get(annotated_types.Gt)
    high = bounds.get(annotated_types.Le) or bounds.get(annotated_types.Lt)
    limits = {
        "min": None if low is None else getattr(low, "ge", getattr(low, "gt", None)),
        "max": None if high is None else getattr(high, "le", getattr(high, "lt", None)),
        "min_open": isinstance(low, annotated_types.Gt),
        "max_open": isinstance(high, annotated_types.Lt),
    }
    if kind is int:
        return click.IntRange(**limits) if low or high else int
    if kind is float:
        return click.FloatRange(**limits) if low or high else float
    return str


def run_stage(name: str, **arguments: Any):
    """Run the declared stage's flow (``flows.stages.stage_flow``): its manifest."""
    from flows.stages import stage_flow

    return stage_flow(name)(**arguments)


def folder_option(flag: str, name: str | None, help: str, required: bool = True):
    """A folder option (``--input``, ``--out``, ``--target``): one line a folder, not seven."""
    decls = (flag, name) if name else (flag,)
    return click.option(*decls, required=required, default=None, type=click.Path(file_okay=False), help=help)


def field_options(model: type, *fields: str):
    """One option a field, in the order given (``--help`` lists them so)."""

    def decorate(function):
        for field in reversed(fields):
            function = field_option(model, field)(function)
        return function

    return decorate


def layers_option(model: type, field: str, **overrides: Any):
    """``--layers low,mid,high`` for a layer-id list field, read by ``parse_layers`` in the command's
    body (after its input folder is checked: a wrong --input is not a layer error)."""
    return field_option(model, field, "--layers", "layers", type=str, **overrides)


def parse_layers(text: str | None) -> list[int] | None:
    """``"2,16,29"`` -> ``[2, 16, 29]``, checked as the config checks it."""
    if text is None:
        return None
    try:
        layers = [int(part) for part in text.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"expected three comma-separated layer ids such as 2,16,29, got {text!r}", param_hint="--layers"
        ) from None
    from eagle3_core.target.config import aux_layer_problem

    problem = aux_layer_problem(layers)
    if problem:
        raise click.BadParameter(problem, param_hint="--layers")
    return layers


def recipe_options(what: str, field: str):
    """``--family`` and ``--recipe``: where the target's ``what`` (``field`` in a recipe) come from."""
    family = click.option(
        "--family",
        type=str,
        default=None,
        help=f"Chat family: {what} come from the bundled recipe whose target.family it is (configs/*.yaml).",
    )
    recipe = click.option(
        "--recipe",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"Take {field} from this recipe instead.",
    )
    return lambda function: family(recipe(function))


def target_options(model: type):
    """``--family``, ``--recipe`` and ``--trust-remote-code`` (``model`` is ``TargetConfig``): every
    command that takes a target takes its recipe, so its parsers, tokenizer mode and token facts
    reach each process the command starts; without one, the target is its path alone."""
    trust = field_option(model, "trust_remote_code")
    recipe = recipe_options("its parsers, tokenizer mode and token facts", "the target's facts (its `target:` section)")
    return lambda function: recipe(trust(function))
