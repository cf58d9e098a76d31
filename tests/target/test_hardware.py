"""What ``auto`` means for a device (``target.hardware``): for work in this process, torch's view of
this machine (``resolve_device``); for a vLLM server, which runs in its own environment, the machine's
visible NVIDIA GPU (``server_device``), whatever eagle3's own torch was built for."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle3_core.serve import ServeConfig, VLLMServer
from eagle3_core.serve.vllm_server import resolve_enforce_eager
from eagle3_core.target import hardware
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.hardware import resolve_device, server_device

CORE = Path(__file__).resolve().parents[2] / "eagle3_core"


@pytest.mark.parametrize("named", ["cpu", "cuda", "cuda:1"])
def test_a_named_device_is_kept(named):
    assert resolve_device(named) == named


@pytest.mark.parametrize(("visible", "device"), [(True, "cuda"), (False, "cpu")])
def test_auto_is_cuda_exactly_when_torch_sees_a_gpu(monkeypatch, visible, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible)
    assert resolve_device("auto") == device


def gpu_node(tmp_path: Path, present: bool) -> Path:
    node = tmp_path / "nvidia0"
    if present:
        node.write_text("")
    return node


def test_a_server_on_auto_is_a_gpu_server_on_a_gpu_machine_whatever_eagle3s_torch_sees(monkeypatch, tmp_path):
    """eagle3's own torch may be a CPU build on a GPU machine; the server runs in vLLM's environment.
    Judged by eagle3's torch, a GPU target was served as a CPU one: eager, a CPU KV-cache size."""
    monkeypatch.setattr(hardware, "NVIDIA_DEVICE", gpu_node(tmp_path, present=True))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = ServeConfig(port=8000, device="auto")
    assert server_device("auto") == "cuda" and resolve_device("auto") == "cpu"
    assert resolve_enforce_eager(cfg) is False
    command = VLLMServer.for_target(TargetConfig(path=str(tmp_path)), cfg).command("python")
    assert "--kv-cache-memory-bytes" not in command and "--enforce-eager" not in command


@pytest.mark.parametrize("hidden", ["", "-1", "none"])
def test_a_server_on_a_machine_whose_gpus_are_hidden_is_a_cpu_server(monkeypatch, tmp_path, hidden):
    monkeypatch.setattr(hardware, "NVIDIA_DEVICE", gpu_node(tmp_path, present=True))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
    assert server_device("auto") == "cpu"


def test_nvidia_smi_on_path_without_a_device_is_a_cpu_server(monkeypatch, tmp_path):
    """A container with the tool and no GPU: the old rule (``nvidia-smi`` on PATH) served it as a GPU one."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path('/usr/bin')}")
    monkeypatch.setattr(hardware, "NVIDIA_DEVICE", gpu_node(tmp_path, present=False))
    cfg = ServeConfig(port=8000, device="auto")
    assert resolve_enforce_eager(cfg) is True
    command = VLLMServer.for_target(TargetConfig(path=str(tmp_path)), cfg).command("python")
    assert "--kv-cache-memory-bytes" in command


def test_the_device_rules_live_in_one_module():
    for rule in ("def resolve_device(", "def server_device("):
        defined = [p.relative_to(CORE) for p in CORE.rglob("*.py") if rule in p.read_text()]
        assert defined == [Path("target/hardware.py")], rule
