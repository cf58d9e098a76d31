"""A stage's own Prefect hooks (``tasks/<name>.py``) are the ones ``tasks/stage.py`` calls: a hook
that no task calls would never run while its author believed it did, and a call of a hook that no stage
has is dead code."""

from __future__ import annotations

import ast
from pathlib import Path

from eagle3_core.stages import STAGES

TASKS = Path(__file__).resolve().parents[2] / "tasks"
NAMES = [spec.name for spec in STAGES]
RETIRED = ("prepare",)  # ``prepare(stage)``: went when no stage had one (generate builds its pre-flight itself)


def hooks_called() -> set[str]:
    """The hook names ``tasks/stage.py`` looks up (``own_hook(name, "<hook>")``)."""
    tree = ast.parse((TASKS / "stage.py").read_text(encoding="utf-8"))
    return {
        node.args[1].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "own_hook"
        and len(node.args) == 2
        and isinstance(node.args[1], ast.Constant)
    }


def hooks_defined(name: str) -> set[str]:
    """The top-level functions of ``tasks/<name>.py`` (none where the stage has no such module)."""
    path = TASKS / f"{name}.py"
    if not path.exists():
        return set()
    return {node.name for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.FunctionDef)}


def test_every_hook_the_tasks_call_is_one_some_stage_has():
    called = hooks_called()
    assert called == {"publish"}, called
    defined = set().union(*(hooks_defined(name) for name in NAMES))
    assert called <= defined, f"hooks that no stage has: {sorted(called - defined)}"


def test_no_stage_defines_a_hook_the_tasks_no_longer_call():
    assert hooks_defined("generate") >= {"publish"}  # the scan reads the stages' modules (not vacuous)
    found = {name: sorted(hooks_defined(name) & set(RETIRED)) for name in NAMES}
    assert not any(found.values()), f"never called (tasks/stage.py): {found}"
