"""The house stands: every import in eagle3_core runs down the declared layers, and none closes a cycle.

Imports are read from the source (``ast``), lazy ones inside functions included (they run too);
only ``if TYPE_CHECKING:`` blocks are left out (they never run). A unit is a top-level module or
package of eagle3_core (``extract``, ``fsio``); a unit may import itself and any unit of a lower
layer, never one of its own layer or above. So extract never imports train, the spool imports
neither, and the contracts import no stage. A new unit fails here until it is given a layer.
The six stage packages share one layer: what two stages share sits in a unit below both, never in
one of them (``test_no_stage_package_imports_another``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eagle3_core.stages import STAGE_NAMES

CORE = Path(__file__).resolve().parents[1] / "eagle3_core"

STAGE_PACKAGES = tuple(f"stages.{name}" for name in STAGE_NAMES)  # every declared stage's package, one layer
# folders that group units: a module under one belongs to the unit ``group.name`` (``run.fsio``, ``stages.train``)
GROUPS = ("run", "target", "states", "stages", "nightly")

# Lowest first. Each entry: units that may import any unit of the entries before it, and nothing else.
LAYERS: list[tuple[str, ...]] = [
    ("__init__", "errors", "base", "ports"),  # ports: a free port, standard library only
    (
        "run.__init__",
        "target.__init__",
        "states.__init__",
        "nightly.__init__",
        "run.checksums",
        "target.config",
        "run.progress",
        "run.rejects",
        "run.layout",
        "recipe_file",
        "target.hardware",
    ),  # recipe_file: every YAML recipe read
    ("run.fsio",),
    ("run.manifest", "run.lock", "target.fingerprint", "tracking"),  # tracking: the trackers, below train and evaluate
    # metadata of the on-disk contracts, below every reader of them (the card reads report.json); run.keys: every
    # stage's skip key, below the driver that builds it
    ("contracts", "run.keys"),
    ("drafter", "run.driver", "serve"),  # the stage driver
    # tensors (the shard writer, the target model); what several stages share, below all of them: the one
    # tokenizer loader and its facts, the disk figures, the prompt inputs
    ("states.target_size", "states.writer", "toy", "target.tokenizer", "target.storage", "prompts"),
    (
        "spool",
        "chat",
        "states.target_model",
    ),  # spool: below both the engines' producer and the reader (train); chat: messages, parse, render
    ("states.engines", "endpoint", "rebuild"),  # the hidden-state engines, the endpoint client, the token rebuild
    ("preflight",),  # a recipe against a live server: endpoint + rebuild, below generate
    STAGE_PACKAGES,  # one layer: no stage package imports another
    ("nightly.versions",),  # the nightly's dated dataset versions (generate's sample keys)
    ("stages.__init__",),  # the DAG's declarations
    ("config",),
    ("run.summary", "nightly.summary"),
]
LAYER_OF = {unit: n for n, units in enumerate(LAYERS) for unit in units}


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(CORE.rglob("*.py"))}


def unit_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    if parts[1] in GROUPS:  # the group's own __init__ is a unit of its own
        return ".".join(parts[1:3]) if len(parts) > 2 else f"{parts[1]}.__init__"
    return parts[1]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST):
    """Every import statement that can run (``if TYPE_CHECKING:`` bodies skipped)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The eagle3_core modules the file imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "eagle3_core"}
        elif node.level == 0 and node.module and node.module.split(".")[0] == "eagle3_core":
            subs = {f"{node.module}.{a.name}" for a in node.names}
            found |= (subs & set(known)) or {node.module}
    return {m for m in found if m in known}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, known) - {name} for name, path in known.items()}


def test_every_unit_of_eagle3_core_has_a_layer():
    missing = sorted({unit_of(m) for m in modules()} - set(LAYER_OF))
    assert not missing, f"give these units a layer in tests/test_layers.py LAYERS: {missing}"


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            a, b = unit_of(module), unit_of(target)
            if a != b and LAYER_OF.get(b, -1) >= LAYER_OF.get(a, -1):
                bad.append(f"{module} imports {target} ({a} is layer {LAYER_OF.get(a)}, {b} layer {LAYER_OF.get(b)})")
    return bad


def test_no_import_runs_against_the_layers():
    bad = upward_imports(graph())
    assert not bad, "imports against the layers:\n  " + "\n  ".join(bad)


def stage_imports(edges: dict[str, set[str]]) -> list[str]:
    """Every import of one stage package by another, lazy ones included."""
    return [
        f"{module} imports {target}"
        for module, targets in sorted(edges.items())
        for target in sorted(targets)
        if unit_of(module) in STAGE_PACKAGES and unit_of(target) in set(STAGE_PACKAGES) - {unit_of(module)}
    ]


def test_no_stage_package_imports_another():
    bad = stage_imports(graph())
    assert not bad, "stage packages importing another (move what they share into a unit below both):\n  " + (
        "\n  ".join(bad)
    )


def test_a_stage_importing_another_is_caught():
    """The rule is not vacuous: vocab reading reconstruct's code, or evaluate generate's, is named (and a
    shared unit below both is not)."""
    edges = {
        "eagle3_core.stages.vocab.stage": {"eagle3_core.stages.reconstruct.stage", "eagle3_core.target.tokenizer"},
        "eagle3_core.stages.evaluate.online": {
            "eagle3_core.stages.generate.request_loop",
            "eagle3_core.stages.evaluate.metrics",
        },
    }
    assert stage_imports(edges) == [
        "eagle3_core.stages.evaluate.online imports eagle3_core.stages.generate.request_loop",
        "eagle3_core.stages.vocab.stage imports eagle3_core.stages.reconstruct.stage",
    ]
    assert len(upward_imports(edges)) == 2


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycle_in_eagle3_core():
    found = cycles(graph())
    assert not found, "import cycles:\n  " + "\n  ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize(
    "edges, expected",
    [
        (
            {"eagle3_core.stages.extract.a": {"eagle3_core.stages.train.b"}, "eagle3_core.stages.train.b": set()},
            "stages.extract",
        ),
        ({"eagle3_core.spool.a": {"eagle3_core.stages.extract.b"}, "eagle3_core.stages.extract.b": set()}, "spool"),
    ],
)
def test_an_import_up_the_layers_is_caught(edges, expected):
    """The check is not vacuous: extract importing train, or the spool importing extract, is named."""
    assert [line for line in upward_imports(edges) if line.startswith(f"eagle3_core.{expected}")]


def test_a_cycle_is_caught():
    edges = {
        "eagle3_core.x.a": {"eagle3_core.x.b"},
        "eagle3_core.x.b": {"eagle3_core.x.c"},
        "eagle3_core.x.c": {"eagle3_core.x.a"},
    }
    assert cycles(edges) == [["eagle3_core.x.a", "eagle3_core.x.b", "eagle3_core.x.c"]]
