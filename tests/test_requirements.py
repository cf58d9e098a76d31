"""CI cannot be green on a broken install: a missing part fails under the strict flag, skips otherwise."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_core.serve import locate
from tests.fixtures import requirements
from tests.fixtures.requirements import require_deepspeed, require_vllm

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_vllm(tmp_path, monkeypatch):
    """An install whose .venv-vllm is gone."""
    monkeypatch.delenv("EAGLE3_VLLM_PYTHON", raising=False)
    monkeypatch.setattr(locate, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    requirements._find_vllm.cache_clear()
    yield
    requirements._find_vllm.cache_clear()


@pytest.fixture
def no_deepspeed(monkeypatch):
    real = requirements.importlib.util.find_spec
    monkeypatch.setattr(
        requirements.importlib.util, "find_spec", lambda name: None if name == "deepspeed" else real(name)
    )


@pytest.mark.parametrize("flag", [{"EAGLE3_REQUIRE_SERVICES": "1"}, {"CI": "true"}])
def test_under_the_strict_flag_a_missing_vllm_fails_naming_it_and_the_fix(no_vllm, monkeypatch, flag):
    for name, value in flag.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(pytest.fail.Exception) as err:
        require_vllm()
    assert "vLLM (.venv-vllm) is missing" in str(err.value) and "make setup" in str(err.value)


def test_under_the_strict_flag_a_missing_deepspeed_fails_naming_it_and_the_fix(no_deepspeed, monkeypatch):
    monkeypatch.setenv("EAGLE3_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception) as err:
        require_deepspeed()
    assert "DeepSpeed is missing" in str(err.value) and "make setup" in str(err.value)


def test_without_the_flag_a_missing_vllm_skips_with_the_fix(no_vllm, monkeypatch):
    monkeypatch.delenv("EAGLE3_REQUIRE_SERVICES", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="vLLM .* is missing.*make setup"):
        require_vllm()


def test_ci_sets_the_strict_flag():
    ci = (REPO / ".ci" / "run").read_text()
    assert "EAGLE3_REQUIRE_SERVICES=1" in ci


def test_tests_that_start_a_prefect_server_or_build_the_toy_are_not_fast():
    """Markers follow from the fixtures: `-m "not slow"` selects none of these modules' tests."""
    modules = ["tests/toy/test_toy_target.py", "tests/flows/test_nightly.py"]
    fast = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", *modules],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    slow = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow", *modules],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "::" not in fast.stdout and "deselected" in fast.stdout, fast.stdout + fast.stderr
    assert all(any(line.startswith(m) for line in slow.stdout.splitlines()) for m in modules), slow.stdout


FLOW_PROBE = """
import sys
import pytest


class RunAFlow:
    def pytest_collection_finish(self, session):
        from prefect import flow

        @flow
        def nothing():
            return 1

        try:
            nothing()
            print("the flow ran")
        except ValueError as exc:
            print("refused:", exc)


sys.exit(pytest.main(["--collect-only", "-q", "-m", "not slow", "-p", "no:cacheprovider", "tests/test_config.py"],
                     plugins=[RunAFlow()]))
"""


def test_under_not_slow_a_flow_run_cannot_start_a_prefect_server(tmp_path):
    """A test that forgets its `prefect_api` in `make test-fast` fails at once instead of starting a server."""
    probe = tmp_path / "probe.py"
    probe.write_text(FLOW_PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"PREFECT_HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, str(probe)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert "refused: No Prefect API URL provided" in run.stdout, run.stdout + run.stderr


SKIPS = """
import pytest

def test_on_a_gpu():
    pytest.skip("needs a GPU: a kernel with no CPU backward")

def test_with_a_part_ci_could_install():
    pytest.skip("the frobnicator is not installed")

def test_that_runs():
    pass
"""


def run_skips(tmp_path, strict: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "EAGLE3_REQUIRE_SERVICES")}
    env.update({"EAGLE3_REQUIRE_SERVICES": "1"} if strict else {})
    command = [sys.executable, "-m", "pytest", "-p", "tests.fixtures.requirements", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*command, "-q", str(tmp_path / "test_skips.py")], cwd=REPO, env=env, capture_output=True, text=True
    )


def test_under_the_strict_flag_only_a_gpu_skip_passes_and_the_end_counts_skips_by_reason(tmp_path):
    done = run_skips(tmp_path, strict=True)
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 passed, 1 skipped" in done.stdout
    assert "skipped under EAGLE3_REQUIRE_SERVICES=1 or CI=true: the frobnicator is not installed" in done.stdout
    assert "1 skipped: 1 x needs a GPU: a kernel with no CPU backward" in done.stdout


def test_without_the_flag_every_skip_skips_and_is_counted(tmp_path):
    done = run_skips(tmp_path, strict=False)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 2 skipped" in done.stdout
    assert (
        "2 skipped: 1 x needs a GPU: a kernel with no CPU backward; 1 x the frobnicator is not installed" in done.stdout
    )
