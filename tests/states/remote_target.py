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

SIZES = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=6,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=256,
)


def make_remote_target(path: Path) -> Path:
    """Weights of a random Llama under a config that names the folder's own classes (``auto_map``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**SIZES, eos_token_id=None, bos_token_id=None)).save_pretrained(path)
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
