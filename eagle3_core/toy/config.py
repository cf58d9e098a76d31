"""The toy reasoning target's recipe: hashing it gives the cache key of the built model."""

from __future__ import annotations

from pydantic import Field

from eagle3_core.base import StrictModel


class ToyTargetConfig(StrictModel):
    """A tiny Llama that answers arithmetic with a chain of thought, trained on CPU in minutes."""

    vocab_size: int = Field(384, ge=64, description="Word-level tokenizer size, specials included.")
    num_hidden_layers: int = Field(4, ge=4, description="Decoder layers (EAGLE-3 needs three distinct auxiliary layers).")
    hidden_size: int = Field(128, ge=32, description="Model width.")
    intermediate_size: int = Field(512, ge=32, description="MLP width.")
    num_attention_heads: int = Field(4, ge=1, description="Attention heads (head size >= 32: vLLM's CPU attention rejects 16).")
    num_key_value_heads: int = Field(2, ge=1, description="KV heads.")
    train_questions: int = Field(12000, ge=100, description="Generated training questions.")
    heldout_questions: int = Field(500, ge=10, description="Held-out questions for the accuracy report.")
    train_seconds: float = Field(240.0, gt=0, description="CPU training budget in seconds.")
    batch_size: int = Field(64, ge=1, description="Training batch size.")
    lr: float = Field(2e-3, gt=0, description="Peak learning rate (AdamW, cosine).")
    seed: int = Field(0, description="Seed for questions and weights.")
    cache_dir: str | None = Field(None, description="Where built targets are cached; None = $EAGLE3_CACHE or ~/.cache/eagle3.")
