"""Configuration of the extract stage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from eagle3_core.base import StrictModel


class ExtractConfig(StrictModel):
    """Capture the target's auxiliary and final hidden states for every training token."""

    engine: Literal["transformers", "vllm"] = Field("transformers", description="transformers for targets that fit; vllm for targets only a serving engine holds.")
    layers: list[int] | None = Field(None, description="Auxiliary layer ids (vLLM counting); None = target.aux_layer_ids or (2, N//2, N-3).")
    device: str = Field("auto", description="`auto` (cuda when present, else cpu), `cpu`, `cuda`, or `cuda:N`.")
    max_tokens_per_batch: int = Field(16384, ge=1, description="Token budget per forward batch (batches are bucketed by length).")
    shard_tokens: int = Field(1_000_000, ge=1, description="Tokens per safetensors shard.")
    mode: Literal["offline", "online"] = Field("offline", description="offline stores hidden/; online leaves it to training.")
