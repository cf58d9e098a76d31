"""What the Prefect UI's run form sends: a deployment's stored parameters with every field the
parameter schema describes filled from its default (nested models too), and single-field edits."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any


def resolve(node: dict, definitions: dict) -> dict:
    """A schema node with its ``$ref`` (or one-item ``allOf``) followed."""
    if "$ref" in node:
        return definitions[node["$ref"].split("/")[-1]]
    if len(node.get("allOf", [])) == 1:
        return resolve(node["allOf"][0], definitions)
    return node


def form_values(node: dict, value: Any, definitions: dict) -> Any:
    """``value`` with each field it lacks filled as the form does: its default, or a nested
    model's own defaults."""
    node = resolve(node, definitions)
    properties = node.get("properties")
    if not properties or not (value is None or isinstance(value, dict)):
        return value
    filled = dict(value or {})
    for name, prop in properties.items():
        if name in filled:
            filled[name] = form_values(prop, filled[name], definitions)
        elif "default" in prop:
            filled[name] = copy.deepcopy(prop["default"])
        elif resolve(prop, definitions).get("properties"):
            filled[name] = form_values(prop, {}, definitions)
    return filled


def filled_form(schema: dict, parameters: dict) -> dict:
    """The parameters a run submitted from the deployment's form with nothing edited carries."""
    return form_values(schema, parameters, schema.get("definitions", {}))


def leaves(node: dict, value: Any, definitions: dict, path: tuple = ()) -> Iterator[tuple[tuple, dict, Any]]:
    node = resolve(node, definitions)
    properties = node.get("properties")
    if properties and isinstance(value, dict):
        for name, prop in properties.items():
            yield from leaves(prop, value.get(name), definitions, (*path, name))
    else:
        yield path, node, value


def other_valid_value(node: dict, value: Any, definitions: dict) -> list:
    """Another value of the field's own type and range: the other choices of a choice, the other
    bool, a number moved inside its bounds (strings, lists and unset fields are left alone)."""
    choices = list(node.get("enum", []))
    for option in node.get("anyOf", []):
        option = resolve(option, definitions)
        choices += option.get("enum", []) + ([option["const"]] if "const" in option else [])
    if choices:
        return [c for c in choices if c != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, (int, float)):
        top = node.get("maximum", node.get("exclusiveMaximum"))
        moved = value + 1 if isinstance(value, int) else value * 2
        return [moved if top is None or moved < top else type(value)(value / 2)]
    return []


def single_edits(schema: dict, form: dict) -> Iterator[tuple[str, dict]]:
    """(dotted field, the form with that one field edited) for every field with another valid value."""
    definitions = schema.get("definitions", {})
    for path, node, value in leaves(schema, form, definitions):
        for other in other_valid_value(node, value, definitions):
            edited = copy.deepcopy(form)
            place = edited
            for key in path[:-1]:
                place = place[key]
            place[path[-1]] = other
            yield ".".join(path), edited
