"""The docs say what the code does: generated pages match their sources, every reject reason has its
fix, every link inside the repository resolves, and the two front pages keep their size."""

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [
    REPO / "README.md",
    REPO / "CONTRIBUTING.md",
    *sorted(DOCS.rglob("*.md")),
    *sorted((REPO / "benchmarks").glob("*.md")),
]


def generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def written():
    """Each generated page -> what docs/generate.py writes there now."""
    return generator().pages()


@pytest.mark.parametrize("page", ["configuration.md", "families.md"])
def test_a_generated_page_is_what_docs_generate_writes(written, page):
    path = DOCS / page
    assert path.read_text(encoding="utf-8") == written[path], (
        f"docs/{page} is out of date: run `.venv/bin/python docs/generate.py` and commit the page"
    )


def test_every_recipe_has_a_row_in_the_families_table():
    text = (DOCS / "families.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((REPO / "configs").glob("*.yaml")) if f"[`{p.name}`]" not in text]
    assert missing == [], f"recipes without a row in docs/families.md: {missing}"


def test_every_config_field_has_a_description():
    from pydantic import BaseModel

    from eagle3_core.config import PipelineConfig

    gen, missing, queue, seen = generator(), [], [("", PipelineConfig)], set()
    while queue:
        path, model = queue.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            dotted = f"{path}.{name}".lstrip(".")
            if not (field.description or "").strip():
                missing.append(dotted)
            queue += [(dotted, m) for m in gen.models_in(field.annotation) if issubclass(m, BaseModel)]
    assert missing == [], f"config fields without a description: {missing}"


# Where a reject reason is named: the first string given to these (RowRejection("unknown_shape", ...),
# result.reject(sid, "overlong", ...), bad_line(file, number, "invalid_json", ...)), a (reason, detail)
# tuple returned by the text rules, or a module constant (NO_ANSWER = "no_assistant_turn").
REASON_CALL = re.compile(
    r"\b(?:RowRejection|Problem|Transient|RequestFailed|bad_line|reject)\(\s*(?:[\w.]+,\s*){0,3}\"([a-z][a-z0-9_]*)\""
)
REASON_TUPLE = re.compile(r"return \(\s*\"([a-z][a-z0-9_]*)\",")
REASON_CONSTANT = re.compile(r"^[A-Z_]+ = \"([a-z]+(?:_[a-z0-9]+)+)\"$", re.M)
REASON_FILES = ["chat", "prompts", "endpoint", "rebuild", "stages/generate", "stages/reconstruct"]
CONSTANT_FILES = ["stages/generate/dataset_answer.py", "target/config.py"]


def reject_reasons() -> set[str]:
    """Every reject reason the code names (rows dropped by generate and reconstruct)."""
    from eagle3_core.endpoint.health import REASONS

    core = REPO / "eagle3_core"
    found = set(REASONS)
    for folder in REASON_FILES:
        for path in (core / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            found |= set(REASON_CALL.findall(text)) | set(REASON_TUPLE.findall(text))
    for name in CONSTANT_FILES:
        found |= set(REASON_CONSTANT.findall((core / name).read_text(encoding="utf-8")))
    return found


def test_every_reject_reason_in_the_code_has_its_fix_in_troubleshooting():
    reasons = reject_reasons()
    assert {"unknown_shape", "overlong", "no_server_prompt_ids", "two_reasoning_blocks"} <= reasons  # the scan works
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    missing = sorted(r for r in reasons if f"`{r}`" not in text)
    assert missing == [], f"reject reasons without a row in docs/troubleshooting.md: {missing}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub makes for ``page``: lower case, punctuation dropped, spaces as hyphens."""
    found: set[str] = set()
    for heading in re.findall(
        r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S), re.M
    ):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(
            slug if slug not in found else next(f"{slug}-{n}" for n in range(1, 99) if f"{slug}-{n}" not in found)
        )
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_stays_inside_the_repository_and_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(REPO) or not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert broken == [], (
        f"{page.relative_to(REPO)}: links outside the repository, to nothing or to no heading: {broken}"
    )


@pytest.mark.parametrize(("page", "most"), [("README.md", 150), ("CONTRIBUTING.md", 250)])
def test_the_front_pages_stay_short(page, most):
    lines = len((REPO / page).read_text(encoding="utf-8").splitlines())
    assert lines <= most, f"{page} has {lines} lines, more than {most}: move the detail to docs/"


def test_contributing_has_at_most_fifteen_rules_each_naming_its_guard():
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    rules = re.findall(r"^\d+\. (.*)$", text.split("## Rules", 1)[1].split("\n## ", 1)[0], re.M)
    assert 0 < len(rules) <= 15
    assert all("tests/" in rule or "test_" in rule for rule in rules), [r for r in rules if "test" not in r]
