"""The toy reasoning target's recipe: hashing it gives the cache key of the built model."""

from __future__ import annotations

from pydantic import Field, model_validator

from eagle3_core.base import StrictModel


class ToyTargetConfig(StrictModel):
    """A tiny Llama that answers arithmetic with a chain of thought, trained on CPU in minutes."""

    vocab_size: int = Field(
        384,
        ge=300,
        description="Upper bound of the byte-level BPE vocabulary (256 bytes, specials, think tokens, merges); merging stops earlier when the corpus has no frequent pair left.",
    )
    num_hidden_layers: int = Field(
        4, ge=4, description="Decoder layers (EAGLE-3 reads three distinct auxiliary layers)."
    )
    hidden_size: int = Field(128, ge=32, description="Model width.")
    intermediate_size: int = Field(512, ge=32, description="MLP width.")
    num_attention_heads: int = Field(
        4, ge=1, description="Attention heads (head size >= 32: vLLM's CPU attention rejects 16)."
    )
    num_key_value_heads: int = Field(2, ge=1, description="KV heads (grouped-query attention).")
    max_position_embeddings: int = Field(
        2048, ge=128, description="Longest context the config declares (vLLM's --max-model-len must not exceed it)."
    )
    heldout_questions: int = Field(
        500,
        ge=3,
        description="Held-out questions (a third of each kind), never trained on; scored for the accuracy report and exported for evaluation.",
    )
    train_prompts: int = Field(
        2000, ge=10, description="Training-pool prompts exported to prompts_train.jsonl for the generate stage."
    )
    train_steps: int = Field(
        400,
        ge=1,
        description="Optimizer steps (the step count, not the clock, ends training: a build is a pure function of its recipe).",
    )
    warmup_steps: int = Field(20, ge=0, description="Linear warm-up steps before the cosine decay.")
    batch_size: int = Field(64, ge=1, description="Questions per step.")
    lr: float = Field(2e-3, gt=0, description="Peak learning rate (AdamW, cosine to a tenth).")
    bf16_autocast: bool = Field(
        True,
        description="Train under bf16 autocast with fp32 weights (1.5x faster on CPUs with AVX-512 bf16; the saved weights stay fp32).",
    )
    seed: int = Field(0, description="Seed for the question split, sampling and weights.")
    cache_dir: str | None = Field(
        None,
        description="Where built targets are cached (under `toy/<recipe hash>/`); None = $EAGLE3_CACHE or ~/.cache/eagle3. Not part of the recipe hash.",
    )

    @model_validator(mode="after")
    def _head_size_fits_vllm(self) -> "ToyTargetConfig":
        if self.hidden_size % self.num_attention_heads or self.hidden_size // self.num_attention_heads < 32:
            raise ValueError(
                "toy.hidden_size / toy.num_attention_heads must be a whole head size >= 32 (vLLM's CPU attention)"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("toy.num_attention_heads must be a multiple of toy.num_key_value_heads")
        return self

    def recipe(self) -> dict:
        """What the built model depends on (everything but where it is cached)."""
        return self.model_dump(mode="json", exclude={"cache_dir"})
