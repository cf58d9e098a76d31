"""The dtype a local vLLM server runs in: the recipe's when it names one, else bf16, except for a CPU
server on a CPU without bf16 kernels, where vLLM's bf16 linears fall back to reference loops and
float32 is the fast choice (benchmarks/bench_toy.py --dtype: the toy, AVX2 simulated, 2,253 completion
tokens/s in bf16 against 2,823 in fp32).

Whether this CPU has bf16 kernels is a fact of the machine a test cannot change: the AVX2 case
replaces the one probe (``eagle3_core.target.hardware.cpu_computes_bf16``, as the server module sees it)
with that CPU's answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.serve import ServeConfig, VLLMServer, vllm_server

ROOT = Path(__file__).resolve().parents[2]


def served_dtype(tmp_path, **serve) -> str:
    target = PipelineConfig.from_yaml(ROOT / "configs" / "qwen3.yaml").target.model_copy(update={"path": str(tmp_path)})
    cmd = VLLMServer.for_target(target, ServeConfig(port=8000, **serve)).command("python")
    return cmd[cmd.index("--dtype") + 1]


@pytest.mark.parametrize(("bf16_kernels", "dtype"), [(True, "bfloat16"), (False, "float32")])
def test_a_cpu_server_runs_in_bf16_only_where_the_cpu_computes_it(tmp_path, monkeypatch, bf16_kernels, dtype):
    monkeypatch.setattr(vllm_server, "cpu_computes_bf16", lambda: bf16_kernels)
    assert served_dtype(tmp_path, device="cpu") == dtype


def test_a_gpu_server_runs_in_bf16_whatever_the_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_server, "cpu_computes_bf16", lambda: False)
    assert served_dtype(tmp_path, device="cuda") == "bfloat16"


@pytest.mark.parametrize("bf16_kernels", [True, False])
def test_a_named_dtype_is_served_as_named(tmp_path, monkeypatch, bf16_kernels):
    monkeypatch.setattr(vllm_server, "cpu_computes_bf16", lambda: bf16_kernels)
    assert served_dtype(tmp_path, device="cpu", dtype="float16") == "float16"
    assert served_dtype(tmp_path, device="cpu", dtype="bfloat16") == "bfloat16"
