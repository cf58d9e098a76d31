"""What ``auto`` means for a device (``target.hardware.resolve_device``): one rule, torch's view of this
machine, for the in-process engines and a vLLM server's own settings alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle3_core.serve import ServeConfig, VLLMServer
from eagle3_core.serve.vllm_server import resolve_enforce_eager
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.hardware import resolve_device

CORE = Path(__file__).resolve().parents[2] / "eagle3_core"


@pytest.mark.parametrize("named", ["cpu", "cuda", "cuda:1"])
def test_a_named_device_is_kept(named):
    assert resolve_device(named) == named


@pytest.mark.parametrize(("visible", "device"), [(True, "cuda"), (False, "cpu")])
def test_auto_is_cuda_exactly_when_torch_sees_a_gpu(monkeypatch, visible, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible)
    assert resolve_device("auto") == device


def test_a_server_on_auto_follows_the_same_rule_whatever_tools_are_on_path(monkeypatch, tmp_path):
    """A server was once judged by ``nvidia-smi`` on PATH: a machine with its GPUs hidden
    (``CUDA_VISIBLE_DEVICES=``) was served as a GPU one, with CUDA graphs and no KV-cache size."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path('/usr/bin')}")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = ServeConfig(port=8000, device="auto")
    assert resolve_enforce_eager(cfg) is True
    command = VLLMServer.for_target(TargetConfig(path=str(tmp_path)), cfg).command("python")
    assert "--kv-cache-memory-bytes" in command


def test_there_is_one_device_rule_in_eagle3_core():
    defined = [p.relative_to(CORE) for p in CORE.rglob("*.py") if "def resolve_device(" in p.read_text()]
    assert defined == [Path("target/hardware.py")]
