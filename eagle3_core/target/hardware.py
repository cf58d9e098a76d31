"""What this machine computes on, and what its CPU computes well, for the choices that depend on it
(the device an ``auto`` setting means, the toy's training precision, the dtype a local vLLM server runs
in on CPU).

torch imports lazily: the check costs nothing until a caller needs it.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

NVIDIA_DEVICE = Path("/dev/nvidia0")  # the first GPU's device node, present wherever a container is given one
HIDDEN = {"", "-1", "none", "void", "nodevfiles"}  # CUDA_VISIBLE_DEVICES values that show no GPU


@cache
def cpu_computes_bf16() -> bool:
    """Whether this CPU has bf16 kernels (oneDNN's, AVX-512 and up). Without them (AVX2 only) torch
    and vLLM fall back to reference loops: a bf16 matmul ran at 0.85 GFLOPS against fp32's 110 on
    such a CPU, so work there stays in fp32."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def resolve_device(device: str) -> str:
    """``device``, or for ``auto`` ``cuda`` when torch sees a GPU here (``CUDA_VISIBLE_DEVICES``
    honoured), else ``cpu``: for work in this process, with this environment's torch (the transformers
    engines, the target model, the trainer and offline evaluation get the same answer from torch)."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def server_device(device: str) -> str:
    """``device``, or for ``auto`` the device a vLLM server started from here runs on: ``cuda`` when the
    machine has an NVIDIA GPU and ``CUDA_VISIBLE_DEVICES`` leaves one visible, else ``cpu``. Not this
    process's torch: the server runs in its own environment (vLLM's venv, its own CUDA torch), and
    eagle3's may be a CPU build on a GPU machine, which would serve a GPU target as a CPU one (eager,
    a CPU KV-cache size, fp32). Nor ``nvidia-smi`` on PATH alone, which a container without a device has."""
    if device != "auto":
        return device
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hidden = visible is not None and visible.strip().lower() in HIDDEN
    return "cuda" if NVIDIA_DEVICE.exists() and not hidden else "cpu"
