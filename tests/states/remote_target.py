"""A tiny target that ships its own modeling module, as Kimi's does: its ``model_type`` is unknown
to transformers, so it loads only with ``trust_remote_code=True`` (from the folder itself, offline)."""

from __future__ import annotations

import json
from pathlib import Path

CONFIGURATION = """
from transformers import LlamaConfig


class RemoteTinyConfig(LlamaConfig):
    model_type = "eagle3_remote_tiny"
"""

MODELING = """
from transformers import LlamaForCausalLM

from .configuration_remote_tiny import RemoteTinyConfig


class RemoteTinyForCausalLM(LlamaForCausalLM):
    config_class = RemoteTinyConfig
"""


def make_remote_target(path: Path) -> Path:
    """Weights of a random 6-layer Llama under a config that names the folder's own classes (``auto_map``)."""
    from tests.stages.evaluate.models import make_target

    make_target(path, num_hidden_layers=6)
    (path / "configuration_remote_tiny.py").write_text(CONFIGURATION)
    (path / "modeling_remote_tiny.py").write_text(MODELING)
    config = json.loads((path / "config.json").read_text())
    config["model_type"] = "eagle3_remote_tiny"
    config["architectures"] = ["RemoteTinyForCausalLM"]
    config["auto_map"] = {
        "AutoConfig": "configuration_remote_tiny.RemoteTinyConfig",
        "AutoModelForCausalLM": "modeling_remote_tiny.RemoteTinyForCausalLM",
    }
    (path / "config.json").write_text(json.dumps(config))
    return path
