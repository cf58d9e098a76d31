"""Stands in for Kimi-K2.5's own tokenizer code (``tokenization_kimi.py``) in eagle3's tests.

This file is copied into the stand-in tokenizer folder that ``tests/families/kimi_stand_in.py`` builds and is
loaded from there by ``auto_map`` (``trust_remote_code``), as Kimi's file is. It is NOT Kimi's tokenizer: the
vocabulary is a small byte-level BPE padded so that Kimi's special tokens sit at their real ids. What it copies
from the real class is its behaviour around the chat template, as Kimi-K2.5's ``tokenization_kimi.py`` and
``tool_declaration_ts.py`` (read, not copied) behave:

- ``apply_chat_template`` sorts every dict in ``tools`` by key (recursively), then writes the TypeScript-style
  declarations of the tools into the template variable ``tools_ts_str``; the template renders that in its
  ``tool_declare`` turn and falls back to the tools' compact JSON only where the variable is empty. A tool
  schema the encoder cannot read (an unknown ``type``, a ``$ref`` outside ``$defs``, an enum value of another
  type ...) leaves ``tools_ts_str`` unset, as the real class does (it prints the failure; this one logs it).
- Its defaults are the real override's: ``tokenize=False``, ``add_generation_prompt=True``, ``thinking=True``.

The declarations (``typescript_tools``) follow the published encoder's output format:
``# Tools\\n\\n## functions\\nnamespace functions {\\n`` + one block per function + ``}\\n``; a block is the
``$defs`` interfaces, the function's description as ``// `` lines and ``type NAME = (_: {...}) => any;``;
object fields are the required ones sorted by name, then the optional ones (``name?``) sorted by name, each
after its ``// description``, ``// constraint: value`` (strings: maxLength, minLength, pattern; numbers:
maximum, minimum; arrays: maxItems, minItems) and ``// Default: value`` comment lines, two spaces an indent
level, ``,\\n`` between fields; ``integer`` is ``number``; enums are ``"a" | "b"``; ``anyOf`` and type lists
are unions; ``additionalProperties`` is a ``[k: string]: T`` field; ``$ref: "#"`` makes the root an
``interface parameters``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from transformers import PreTrainedTokenizerFast

logger = logging.getLogger(__name__)

INDENT = "  "
FIELD_SEPARATOR = ",\n"
STRING_LIMITS = ("maxLength", "minLength", "pattern")
NUMBER_LIMITS = ("maximum", "minimum")
ARRAY_LIMITS = ("maxItems", "minItems")
UNION_NAMES = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "{}",
    "array": "Array<any>",
}
ENUM_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)),
    "integer": lambda v: isinstance(v, int),
    "boolean": lambda v: isinstance(v, bool),
}


def sorted_keys(value: Any) -> Any:
    """``value`` with every dict in it rebuilt in key order (lists keep their order)."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def comment_lines(text: str, indent: str = "") -> str:
    """``text`` as ``// `` lines (an empty line stays empty), joined by newlines."""
    return "\n".join(f"{indent}// {line}" if line else "" for line in text.split("\n"))


class _Schemas:
    """The ``$defs`` met while reading one function's parameters, and whether ``$ref: "#"`` was."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.root_referenced = False

    def ref_name(self, ref: str) -> str:
        if ref == "#":
            self.root_referenced = True
            return "parameters"
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        name = ref.rsplit("/", 1)[-1]
        if name not in self.defs:
            raise ValueError(f"$ref {ref!r} names no definition")
        return name


class _Type:
    """One JSON-schema node read as a TypeScript type: ``render(indent)`` and its ``// `` comment lines."""

    def __init__(self, schema: dict, limits: tuple[str, ...] = ()) -> None:
        self.description = schema.get("description", "")
        self.limits = {key: schema[key] for key in sorted(schema) if key in limits}

    def comments(self, indent: str) -> str:
        lines = [comment_lines(self.description, indent)] if self.description else []
        if self.limits:
            lines.append(indent + "// " + ", ".join(f"{key}: {value}" for key, value in self.limits.items()))
        return "".join(line + "\n" for line in lines)

    def render(self, indent: str = "") -> str:
        raise NotImplementedError


class _Named(_Type):
    """A type written as a fixed text: a scalar, a union of type names, an enum, a reference."""

    def __init__(self, schema: dict, text: str, limits: tuple[str, ...] = ()) -> None:
        super().__init__(schema, limits)
        self.text = text

    def render(self, indent: str = "") -> str:
        return self.text


class _AnyOf(_Type):
    def __init__(self, schema: dict, schemas: _Schemas) -> None:
        super().__init__(schema)
        self.members = [read_type(member, schemas) for member in schema["anyOf"]]

    def render(self, indent: str = "") -> str:
        return " | ".join(member.render(indent) for member in self.members)


class _Array(_Type):
    def __init__(self, schema: dict, schemas: _Schemas) -> None:
        super().__init__(schema, ARRAY_LIMITS)
        items = schema.get("items")
        self.item = read_type(items, schemas) if items else _Named({}, "any")

    def render(self, indent: str = "") -> str:
        inner = indent + INDENT
        notes = self.item.comments(inner)
        if not notes:
            return f"Array<{self.item.render(indent)}>"
        return f"Array<\n{notes}{inner}{self.item.render(inner)}\n{indent}>"


class _Field:
    """A property of an object (or a parameter of the function)."""

    def __init__(self, name: str, schema: Any, optional: bool, schemas: _Schemas) -> None:
        self.name, self.optional = name, optional
        self.type = read_type(schema, schemas)
        self.default = schema.get("default") if isinstance(schema, dict) else None

    def render(self, indent: str) -> str:
        notes = self.type.comments(indent)
        if self.default is not None:
            number = isinstance(self.default, (int, float, bool))
            shown = repr(self.default) if number else json.dumps(self.default, ensure_ascii=False)
            notes += f"{indent}// Default: {shown}\n"
        return f"{notes}{indent}{self.name}{'?' if self.optional else ''}: {self.type.render(indent)}"


class _Object(_Type):
    def __init__(self, schema: dict, schemas: _Schemas) -> None:
        super().__init__(schema)
        self.fields: list[_Field] = []
        self.extra: Any = None
        if not schema:
            return
        schemas.defs.update(schema.get("$defs") or {})
        self.extra = schema.get("additionalProperties")
        if isinstance(self.extra, dict):
            self.extra = read_type(self.extra, schemas)
        if "properties" not in schema:
            return
        required = set(schema.get("required", []))
        self.fields = [_Field(name, prop, name not in required, schemas) for name, prop in schema["properties"].items()]

    def render(self, indent: str = "") -> str:
        inner = indent + INDENT
        ordered = sorted((f for f in self.fields if not f.optional), key=lambda f: f.name) + sorted(
            (f for f in self.fields if f.optional), key=lambda f: f.name
        )
        parts = [f.render(inner) for f in ordered]
        if self.extra is not None:
            if self.extra is True:
                extra = "any"
            elif self.extra is False:
                extra = "never"
            elif isinstance(self.extra, _Type):
                extra = self.extra.render(inner)
            else:
                raise ValueError(f"unsupported additionalProperties {self.extra!r}")
            parts.append(f"{inner}[k: string]: {extra}")
        if not parts:
            return "{}"
        return "{\n" + FIELD_SEPARATOR.join(parts) + "\n" + indent + "}"


def _enum(schema: dict) -> _Type:
    values = schema["enum"]
    declared = schema.get("type")
    if isinstance(declared, list):  # one type, or one type and "null"
        if len(declared) == 2 and "null" in declared:
            declared = declared[0] if declared[0] != "null" else declared[1]
        elif len(declared) == 1:
            declared = declared[0]
        else:
            raise ValueError(f"enum of type {declared!r}")
    check = ENUM_CHECKS.get(declared) if declared is not None else None
    if check is not None and not all(v is None or check(v) for v in values):
        raise ValueError(f"an enum value is not a {declared}")
    return _Named(schema, " | ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values))


def read_type(schema: Any, schemas: _Schemas) -> _Type:
    """One JSON-schema node (a dict, or ``true``/``false``) as a TypeScript type."""
    if isinstance(schema, bool):
        return _Named({}, "any" if schema else "null")
    if "$ref" in schema:
        return _Named(schema, schemas.ref_name(schema["$ref"]))
    if "anyOf" in schema:
        return _AnyOf(schema, schemas)
    if "enum" in schema:
        return _enum(schema)
    if "type" in schema:
        kind = schema["type"]
        if isinstance(kind, list):
            return _Named(schema, " | ".join(UNION_NAMES[k] for k in kind))
        if kind == "object":
            return _Object(schema, schemas)
        if kind == "array":
            return _Array(schema, schemas)
        limits = STRING_LIMITS if kind == "string" else NUMBER_LIMITS if kind in ("number", "integer") else ()
        return _Named(schema, "number" if kind == "integer" else kind, limits)
    if schema == {}:
        return _Named({}, "any")
    raise ValueError(f"not a JSON schema: {schema!r}")


def typescript_function(function: dict) -> str:
    """One function's block of the declarations."""
    schemas = _Schemas()
    params = _Object(function.get("parameters") or {}, schemas)
    blocks = []
    if schemas.root_referenced:  # the root is a named interface: fields in their own order, no extra field
        fields = FIELD_SEPARATOR.join(f.render(INDENT) for f in params.fields)
        blocks.append("interface parameters {" + (f"\n{fields}\n" if fields else "") + "}")
    for name, schema in dict(schemas.defs).items():
        body = read_type(schema, schemas).render()
        note = comment_lines(schema["description"]) + "\n" if schema.get("description") else ""
        blocks.append(f"{note}interface {name} {body}")
    argument = "parameters" if schemas.root_referenced else params.render()
    description = function.get("description")
    head = comment_lines(description) if description else ""
    signature = f"type {function.get('name', 'function')} = (_: {argument}) => any;"
    return "\n".join(part for part in ("\n".join(blocks), head, signature) if part)


def typescript_tools(tools: list[dict]) -> str:
    """The ``tools_ts_str`` of OpenAI-style ``tools`` (only ``type: function`` ones; "" when none)."""
    functions = [
        typescript_function(tool["function"])
        for tool in tools or []
        if tool.get("type") == "function" and tool.get("function")
    ]
    if not functions:
        return ""
    return "# Tools\n\n## functions\nnamespace functions {\n" + "\n".join(functions) + "\n}\n"


class KimiStandInTokenizer(PreTrainedTokenizerFast):
    """A byte-level BPE fast tokenizer in Kimi-K2.5's id layout, with Kimi's ``apply_chat_template``."""

    def apply_chat_template(
        self,
        conversation,
        tools: list[dict] | None = None,
        tokenize: bool = False,
        add_generation_prompt: bool = True,
        thinking: bool = True,
        **kwargs,
    ):
        tools = sorted_keys(tools)
        if tools:
            try:
                kwargs["tools_ts_str"] = typescript_tools(tools)
            except Exception as exc:  # the real class falls back to the template's JSON too
                logger.warning("tools not declared in TypeScript style (%s): the template writes them as JSON", exc)
        return super().apply_chat_template(
            conversation,
            tools=tools,
            tokenize=tokenize,
            add_generation_prompt=add_generation_prompt,
            thinking=thinking,
            **kwargs,
        )
