"""Adding a built-in stage is one package plus one line of ``STAGES``, and nothing else.

A copy of the tree is given exactly that: the package ``eagle3_core/stages/lengths/`` (this test's
``tests/flows/lengths/``, written as a contributor writes one) and its declaration after vocab. A
fresh interpreter on the copy then finds the stage everywhere the DAG reaches: the pipeline config's
section, the recipes' ``stages``, the layering test, the details, its flow's form, its CLI command
and the pipeline, which runs it after the stage it reads. No test-only hook is involved: the copy
differs from the tree by the package and one line (``test_the_copy_differs_by_the_package_and_one_line``).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).with_name("lengths")
AFTER = '    StageSpec("vocab", "vocab", lambda c: {"sequences_dir": "reconstruct"}),\n'
# lengths takes no target (its extra arguments are none) and runs a task per sequences part
DECLARATION = (
    '    StageSpec("lengths", "lengths", lambda c: {"sequences_dir": "reconstruct"}, lambda c: {}, unit="part"),\n'
)
COPIED = ("eagle3_core", "flows", "tasks")  # what runs: the core, the flows and CLI, the tasks


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The tree, copied, with the new stage's package and its one line of ``STAGES``."""
    root = tmp_path_factory.mktemp("added") / "tree"
    for name in COPIED:
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PACKAGE, root / "eagle3_core/stages/lengths", ignore=shutil.ignore_patterns("__pycache__"))
    declared = root / "eagle3_core/stages/__init__.py"
    text = declared.read_text()
    assert text.count(AFTER) == 1, "vocab's declaration moved: update AFTER"
    declared.write_text(text.replace(AFTER, AFTER + DECLARATION))
    (root / "tests").mkdir()  # the layering test, unchanged, on the copy's core
    shutil.copy(REPO / "tests/test_layers.py", root / "tests/test_layers.py")
    return root


def run_python(tree: Path, code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """``code`` in a fresh interpreter that imports the copy first (the repo's ``tests`` after it)."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_copy_differs_by_the_package_and_one_line(tree):
    changed = []
    for name in COPIED:
        for path in sorted((tree / name).rglob("*.py")):
            ours = REPO / path.relative_to(tree)
            if not ours.exists():
                changed.append(str(path.relative_to(tree)))
            elif ours.read_text() != path.read_text():
                diff = difflib.ndiff(ours.read_text().splitlines(True), path.read_text().splitlines(True))
                changed += [line for line in diff if line[:2] in ("+ ", "- ")]
    package = [f"eagle3_core/stages/lengths/{p.name}" for p in PACKAGE.glob("*.py")]
    assert sorted(changed) == sorted(["+ " + DECLARATION, *package])


WHERE_IT_SHOWS = """
import json
from click.testing import CliRunner

import eagle3_core
from eagle3_core.config import PipelineConfig
from eagle3_core.contracts.details import details_model
from eagle3_core.stages import BY_NAME, STAGE_NAMES
from flows.cli import cli
from flows.stages import stage_flow

config = PipelineConfig(stages=["reconstruct", "lengths"], lengths={"min_tokens": 3})
flow = stage_flow("lengths")
print(json.dumps({
    "core": eagle3_core.__file__,
    "names": STAGE_NAMES,
    "section": [type(config.lengths).__name__, config.lengths.min_tokens],
    "described": PipelineConfig.model_fields["lengths"].description,
    "choices": PipelineConfig.model_json_schema()["properties"]["stages"]["items"]["enum"],
    "reads": BY_NAME["lengths"].reads(config),
    "details": details_model("lengths").__name__,
    "parameters": list(flow.parameters.model_dump()["properties"]),
    "doc": flow.__doc__,
    "help": CliRunner().invoke(cli, ["lengths", "--help"]).output,
    "commands": CliRunner().invoke(cli, ["--help"]).output,
}))
"""


def test_a_fresh_interpreter_finds_the_stage_wherever_the_dag_reaches(tree):
    seen = json.loads(run_python(tree, WHERE_IT_SHOWS))

    assert seen["core"].startswith(str(tree))  # the copy's core, not the repo's
    assert seen["names"] == ["generate", "reconstruct", "vocab", "lengths", "extract", "train", "evaluate"]
    assert seen["section"] == ["LengthsConfig", 3] and seen["described"].startswith("The lengths stage")
    assert "lengths" in seen["choices"] and seen["reads"] == ["reconstruct"]
    assert seen["details"] == "LengthsDetails"  # declared in its own package
    assert seen["parameters"] == ["cfg", "sequences_dir", "out_dir"]
    assert "sequences_dir: The folder reconstruct wrote (sequences/), read by this stage." in seen["doc"]
    assert "--sequences" in seen["help"] and "--min-tokens" in seen["help"] and "[default: 1; x>=1]" in seen["help"]
    assert "lengths" in seen["commands"]


def test_the_layering_test_puts_the_new_package_in_the_stage_layer(tree):
    code = "import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/test_layers.py']))"
    assert " passed" in run_python(tree, code)
    placed = "import sys; sys.path.insert(0, 'tests'); import test_layers; print('stages.lengths' in test_layers.STAGE_PACKAGES)"
    assert run_python(tree, placed).strip() == "True"


RUN = """
import json, sys

from eagle3_core.config import PipelineConfig
from eagle3_core.run.manifest import read_manifest
from flows.cli import main
from flows.pipeline import pipeline

recipe, sequences, out = sys.argv[1:4]
config = PipelineConfig.model_validate(
    {**json.loads(open(recipe).read()), "stages": ["reconstruct", "lengths"], "lengths": {"min_tokens": 3}}
)
state = pipeline(config, return_state=True)
manifest = read_manifest(config.layout.root / "lengths")
sys.argv = ["eagle3", "lengths", "--sequences", sequences, "--out", out, "--min-tokens", "13"]
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps({
    "completed": state.is_completed(), "message": state.message, "result": state.result(),
    "flow_run": str(state.state_details.flow_run_id),
    "manifest": [manifest.status, manifest.counts, manifest.details],
}))
"""


def test_the_pipeline_and_the_cli_run_it(prefect_api, tree, tmp_path):
    from prefect.settings import PREFECT_API_URL

    from tests.flows.test_pipeline import one_generation, stage_graph
    from tests.prefect_reads import artifacts
    from tests.stages.extract.helpers import write_sequences

    config = PipelineConfig(out=str(tmp_path / "run"))
    one_generation(config, tmp_path)
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps(config.model_dump(mode="json", exclude={"stages"})))
    write_sequences(tmp_path / "seq", [[30, 2, 40], [12]])
    api = {"PREFECT_API_URL": PREFECT_API_URL.value()}  # the copy's runs report to this test's API

    printed = run_python(tree, RUN, str(recipe), str(tmp_path / "seq"), str(tmp_path / "l"), env=api)

    ran = json.loads(printed.strip().splitlines()[-1])

    assert ran["completed"], ran["message"]
    assert ran["result"]["lengths"]["status"] == "ran"
    status, counts, details = ran["manifest"]
    assert status == "complete" and counts["sequences"] == 1 and details["label"] == "all"
    assert stage_graph(ran["flow_run"]) == {"reconstruct": set(), "lengths": {"reconstruct"}}
    assert "| lengths | ran |" in artifacts("pipeline-summary", flow_run_id=ran["flow_run"])[0].data
    assert f"lengths: complete; sequences 2, tokens 70, rejected 2 -> {tmp_path / 'l'}" in printed
