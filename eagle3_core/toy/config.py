"""The toy reasoning target's recipe: hashing it gives the cache key of the built model."""

from __future__ import annotations

from pydantic import Field, model_validator

from eagle3_core.base import StrictModel


class CountdownConfig(StrictModel):
    """The long toy's world (eagle3_core/toy/countdown.py): countdowns of many steps, about 17.5
    tokens of reasoning a step."""

    fewest_steps: int = Field(
        115, ge=1, description="Fewest steps in a held-out or generate prompt (115 steps: about 2K reasoning tokens)."
    )
    most_steps: int = Field(
        455, ge=1, description="Most steps in a held-out or generate prompt (455 steps: about 8K reasoning tokens)."
    )
    short_steps: int = Field(
        40, ge=1, description="Most steps in a first-phase training question (short countdowns teach the rule cheaply)."
    )
    long_fraction: float = Field(
        0.25,
        gt=0,
        le=1,
        description="Share of the training steps, at the end, spent on long countdowns (fewest..most steps).",
    )
    long_batch_size: int = Field(
        4,
        ge=1,
        description="Questions per step in the long phase (each is 2K-8K tokens; batch_size is for the short phase).",
    )
    short_every: int = Field(
        0,
        ge=0,
        description="In the long phase, every short_every-th step is a short one (0: none): long batches hold "
        "two first lines a step, short ones dozens (build 7, with it and in fp32, wrote 48 of 48 held-out traces; "
        "build 6, without either, 41, its errors in the first line).",
    )

    @model_validator(mode="after")
    def _ordered(self) -> "CountdownConfig":
        if not self.short_steps <= self.fewest_steps <= self.most_steps:
            raise ValueError("toy.countdown needs short_steps <= fewest_steps <= most_steps")
        return self


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
        description="Train under bf16 autocast with fp32 weights (1.5x faster on CPUs with AVX-512 bf16; the saved weights stay fp32). A CPU without bf16 kernels trains in fp32 (the report's training.bf16_autocast says which).",
    )
    seed: int = Field(0, description="Seed for the question split, sampling and weights.")
    countdown: CountdownConfig | None = Field(
        None,
        description="Set for the long-reasoning toy (configs/toy-long.yaml): countdowns with 2K-8K tokens of reasoning instead of two-digit arithmetic.",
    )
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
        # exclude_none: a world added later leaves the hashes of the recipes without it as they were
        return self.model_dump(mode="json", exclude={"cache_dir"}, exclude_none=True)
