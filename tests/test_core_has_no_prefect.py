"""eagle3_core is the domain: it must run without the orchestrator."""

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "eagle3_core"


def imported_top_level_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_eagle3_core_never_imports_prefect_or_the_flows():
    offenders = {
        str(path.relative_to(CORE)): sorted(imported_top_level_modules(path) & {"prefect", "flows", "tasks"})
        for path in CORE.rglob("*.py")
    }
    offenders = {name: mods for name, mods in offenders.items() if mods}
    assert offenders == {}
