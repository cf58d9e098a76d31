"""Write the docs pages that are made from the code: the configuration reference and the families table.

    .venv/bin/python docs/generate.py          # rewrite docs/configuration.md and the table in docs/families.md
    .venv/bin/python docs/generate.py --check  # exit 1, naming the page, when a committed page differs

``docs/configuration.md`` is written whole from the pydantic schema (``PipelineConfig`` and every
section under it: field, type, default, description). ``docs/families.md`` is hand-written except the
table between its two markers, one row per ``configs/*.yaml``. ``tests/test_docs.py`` fails when either
committed page differs from what this script writes, so a new field or recipe lands with its doc.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parents[1]
CONFIGURATION = REPO / "docs" / "configuration.md"
FAMILIES = REPO / "docs" / "families.md"
TABLE_START, TABLE_END = "<!-- families table: written by docs/generate.py -->", "<!-- end of families table -->"

CONFIGURATION_HEAD = """# Configuration reference

Written by `docs/generate.py` from the pydantic schema (`eagle3_core/config.py` `PipelineConfig` and the
sections under it); `tests/test_docs.py` fails when this page and the schema differ. A recipe
(`configs/*.yaml`, [families](families.md)) is a YAML file of this model: every model refuses unknown
fields (`extra="forbid"`), and an error names the dotted field and the file. The same model is the
Prefect pipeline flow's parameter, so the UI form validates the same way ([operations](operations.md)).
A field marked *(set by the pipeline)* is a copy the pipeline fills from another section; leave it unset.
"""


def type_name(annotation: object) -> str:
    """The annotation as a reader writes it: ``int | None``, ``list[str]``, ``Literal`` as its choices."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`".replace("'", '"') for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X``, ``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in models_in(a)]


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(section)"
    text = repr(value).replace("'", '"').replace("|", "\\|")
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def section(path: str, model: type[BaseModel]) -> tuple[list[str], list[tuple[str, type[BaseModel]]]]:
    """One table for ``model`` at ``path`` and the sections under it."""
    doc = " ".join((model.__doc__ or "").split())
    lines = [f"## `{path}`" if path else "## The top level", "", f"`{model.__name__}`: {doc}", ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        hidden = any(type(m).__name__ == "SkipJsonSchema" for m in field.metadata) or "SkipJsonSchema" in repr(
            field.annotation
        )
        description = cell(field.description) + (" *(set by the pipeline)*" if hidden else "")
        lines.append(f"| `{name}` | {type_name(field.annotation)} | {default_text(field)} | {description} |")
        nested += [(f"{path}.{name}" if path else name, m) for m in models_in(field.annotation)]
    return lines + [""], nested


def configuration_page() -> str:
    from eagle3_core.config import PipelineConfig

    lines, queue, done = [CONFIGURATION_HEAD], [("", PipelineConfig)], set()
    while queue:
        path, model = queue.pop(0)
        if (path, model) in done:
            continue
        done.add((path, model))
        table, nested = section(path, model)
        lines += table
        queue += nested
    return "\n".join(lines).rstrip() + "\n"


def model_line(recipe: Path) -> str:
    """The model a recipe is for: its first comment line, up to the first colon."""
    first = recipe.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
    depth, head = 0, first
    for i, char in enumerate(first):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ":" and depth == 0 and first[i + 1 : i + 2] in (" ", ""):
            head = first[:i]
            break
    return cell(head if len(head) <= 110 else head[:107] + "...")


def rendered_by(target) -> str:
    """Who renders the prompt: vLLM itself (harmony, a Python encoder) or the model's chat template."""
    if target.harmony is not None:
        return "vLLM (openai-harmony)"
    if target.tokenizer_mode:
        return f"vLLM in Python (`{target.tokenizer_mode}`)"
    return "chat template"


def family_row(recipe: Path) -> str:
    from eagle3_core.config import PipelineConfig

    cfg = PipelineConfig.from_yaml(recipe)
    t = cfg.target
    markers = (
        "harmony channels"
        if t.harmony is not None
        else (f"`{t.think_open}` `{t.think_close}`" if t.think_open else "none")
    )
    tools = f"`{t.tool_parser.vllm}`" if t.tool_parser and t.tool_parser.vllm else "none"
    switch = f"`{t.thinking.kwarg}` (default {t.thinking.default})" if t.thinking else "none"
    cells = [
        f"[`{recipe.name}`](../configs/{recipe.name})",
        f"`{t.family}`",
        model_line(recipe),
        markers,
        f"`{t.reasoning_parser}`" if t.reasoning_parser else "none",
        tools,
        rendered_by(t),
        switch,
        f"`{t.history_reasoning}`",
    ]
    return "| " + " | ".join(cells) + " |"


def families_table() -> str:
    head = [
        "| recipe | `target.family` | model | reasoning markers | vLLM reasoning parser | vLLM tool parser "
        "| prompt rendered by | thinking switch | `history_reasoning` |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [family_row(p) for p in sorted((REPO / "configs").glob("*.yaml"))]
    return "\n".join([TABLE_START, *head, *rows, TABLE_END])


def families_page(current: str) -> str:
    """``current`` with its table replaced by the one the recipes give."""
    start, end = current.index(TABLE_START), current.index(TABLE_END) + len(TABLE_END)
    return current[:start] + families_table() + current[end:]


def pages() -> dict[Path, str]:
    """Each generated page's path -> the text this script writes there."""
    return {CONFIGURATION: configuration_page(), FAMILIES: families_page(FAMILIES.read_text(encoding="utf-8"))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report pages that differ; write nothing")
    args = parser.parse_args()
    stale = []
    for path, text in pages().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            stale.append(path.relative_to(REPO))
            if not args.check:
                path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'differs' if args.check else 'wrote'}: {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
