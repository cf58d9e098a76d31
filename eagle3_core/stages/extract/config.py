"""Configuration of the extract stage."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from eagle3_core.base import StageConfig
from eagle3_core.states.engines.vllm_engine import VllmOptions


class ExtractConfig(StageConfig):
    """Capture the target's auxiliary and final hidden states for every training token."""

    # where and how fast it runs, never the states (the key leaves them out, run.keys): a run may resume on
    # another machine with another budget
    speed_only: ClassVar[frozenset[str]] = frozenset(
        {
            "device",
            "max_tokens_per_batch",
            "disk_headroom",
            "vllm_kv_cache_bytes",
            "vllm_tensor_parallel_size",
            "vllm_max_model_len",
        }
    )

    engine: Literal["transformers", "vllm"] = Field(
        "transformers", description="transformers for targets that fit; vllm for targets only a serving engine holds."
    )
    layers: list[int] | None = Field(
        None, description="Auxiliary layer ids (vLLM counting); None = target.aux_layer_ids or (2, N//2, N-3)."
    )
    device: str = Field("auto", description="`auto` (cuda when present, else cpu), `cpu`, `cuda`, or `cuda:N`.")
    max_tokens_per_batch: int = Field(
        16384, ge=1, description="Token budget per forward batch, padding included (batches are bucketed by length)."
    )
    shard_tokens: int = Field(
        65536,
        ge=1,
        description="Tokens per safetensors shard (a shard holds whole samples; 65536 tokens = 2 GiB at H = 4096). It is the unit of resume.",
    )
    disk_headroom: float = Field(
        1.05, ge=1.0, description="Refuse to start unless free space >= headroom x the bytes still to write."
    )
    vllm_python: str | None = Field(
        None,
        description="Python of the vLLM environment (engine=vllm); None = $EAGLE3_VLLM_PYTHON, then the repo's .venv-vllm/bin/python, then ./.venv-vllm/bin/python, then this Python if it has vllm.",
    )
    vllm_kv_cache_bytes: int | None = Field(
        None,
        ge=1 << 20,
        description="KV-cache bytes for vLLM (engine=vllm); None = vLLM's GPU memory share on a GPU, 256 MiB on CPU.",
    )
    vllm_tensor_parallel_size: int = Field(1, ge=1, description="vLLM tensor parallel size (engine=vllm).")
    vllm_max_model_len: int | None = Field(
        None,
        ge=16,
        description="vLLM max model length (engine=vllm); None = the longest sequence + 1 (keeps vLLM's activation reserve small).",
    )

    @model_validator(mode="after")
    def _three_layers(self) -> "ExtractConfig":
        from eagle3_core.target.config import aux_layer_problem

        problem = aux_layer_problem(self.layers) if self.layers is not None else None
        if problem:
            raise ValueError(f"extract.layers: {problem}")
        return self

    def vllm_options(self) -> VllmOptions:
        """The vLLM engine's start options from the ``vllm_*`` fields."""
        return VllmOptions(
            python=self.vllm_python,
            kv_cache_bytes=self.vllm_kv_cache_bytes,
            tensor_parallel_size=self.vllm_tensor_parallel_size,
            max_model_len=self.vllm_max_model_len,
        )
