"""What this machine computes on, and what its CPU computes well, for the choices that depend on it
(the device an ``auto`` setting means, the toy's training precision, the dtype a local vLLM server runs
in on CPU).

torch imports lazily: the check costs nothing until a caller needs it.
"""

from __future__ import annotations

from functools import cache


@cache
def cpu_computes_bf16() -> bool:
    """Whether this CPU has bf16 kernels (oneDNN's, AVX-512 and up). Without them (AVX2 only) torch
    and vLLM fall back to reference loops: a bf16 matmul ran at 0.85 GFLOPS against fp32's 110 on
    such a CPU, so work there stays in fp32."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def resolve_device(device: str) -> str:
    """``device``, or for ``auto`` ``cuda`` when torch sees a GPU here (``CUDA_VISIBLE_DEVICES``
    honoured), else ``cpu``. The one rule for every ``auto`` device: the transformers engines, the
    target model, and a vLLM server's own settings (its dtype, eager mode, the CPU temperature refusal),
    the same answer the trainer and offline evaluation get from torch. A server was once judged by
    ``nvidia-smi`` on PATH or ``/dev/nvidia0`` instead, which calls a machine whose GPUs are hidden
    (``CUDA_VISIBLE_DEVICES=``), or a container with the tool and no device, a GPU machine."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
