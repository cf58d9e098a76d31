"""The one vLLM locator: serving, evaluation and extraction find vLLM's Python the same way."""

import importlib.util
import sys
from pathlib import Path

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.serve import ServeConfig, VLLMServer, locate
from eagle3_core.serve.locate import vllm_python
from eagle3_core.stages.extract.config import ExtractConfig
from tests.stages.extract.helpers import build_tiny_llama, write_sequences


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """No configured Python, no $EAGLE3_VLLM_PYTHON, no .venv-vllm in the repo or the cwd."""
    monkeypatch.delenv("EAGLE3_VLLM_PYTHON", raising=False)
    monkeypatch.setattr(locate, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_configured_python_wins(nowhere, monkeypatch):
    monkeypatch.setenv("EAGLE3_VLLM_PYTHON", "/elsewhere/python")
    assert vllm_python(sys.executable) == Path(sys.executable)


def test_the_environment_variable_comes_next(nowhere, monkeypatch):
    monkeypatch.setenv("EAGLE3_VLLM_PYTHON", sys.executable)
    assert vllm_python(None) == Path(sys.executable)


def test_a_venv_vllm_in_the_working_directory_is_found(nowhere):
    python = nowhere / ".venv-vllm" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    assert vllm_python(None) == python


def test_this_python_serves_when_it_has_vllm(nowhere, monkeypatch):
    (nowhere / "site" / "vllm").mkdir(parents=True)
    (nowhere / "site" / "vllm" / "__init__.py").touch()
    monkeypatch.syspath_prepend(str(nowhere / "site"))
    assert vllm_python(None) == Path(sys.executable)


@pytest.mark.parametrize("source", ["configured", "env"])
def test_a_named_python_that_does_not_exist_is_an_error_not_a_fallback(nowhere, monkeypatch, source):
    (nowhere / ".venv-vllm" / "bin").mkdir(parents=True)
    (nowhere / ".venv-vllm" / "bin" / "python").touch()
    if source == "env":
        monkeypatch.setenv("EAGLE3_VLLM_PYTHON", "/no/such/python")
    with pytest.raises(ConfigError, match="/no/such/python does not exist") as err:
        vllm_python("/no/such/python" if source == "configured" else None)
    assert "make setup" in str(err.value)


def test_no_vllm_anywhere_says_run_make_setup(nowhere):
    assert importlib.util.find_spec("vllm") is None, "the project's .venv must not hold vLLM (it lives in .venv-vllm)"
    with pytest.raises(ConfigError, match="no Python with vLLM found") as err:
        vllm_python(None)
    assert "make setup" in str(err.value)


def test_serving_and_extraction_share_the_locator(tmp_path):
    """Both callers name the same missing Python the same way (extraction before any vLLM starts)."""
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.target.config import TargetConfig

    tiny_llama = build_tiny_llama(tmp_path / "model", layers=4)
    with pytest.raises(ConfigError, match="/no/such/python does not exist"):
        VLLMServer(tiny_llama, ServeConfig(python="/no/such/python")).start()
    write_sequences(tmp_path / "seq", [[5, 7]])
    cfg = ExtractConfig(engine="vllm", layers=[1, 2, 3], vllm_python="/no/such/python")
    with pytest.raises(ConfigError, match="/no/such/python does not exist"):
        run_extract(cfg, TargetConfig(path=str(tiny_llama)), tmp_path / "seq", tmp_path / "hidden")
