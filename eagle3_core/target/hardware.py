"""What this machine's CPU computes well, for the choices that depend on it (the toy's training
precision, the dtype a local vLLM server runs in on CPU).

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
