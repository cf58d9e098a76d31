"""The DeepSpeed JSON config: generated from ``TrainConfig``, or the user's own file.

Defaults: ZeRO stage 2; bf16 with fp32 master weights on a GPU, fp32 on CPU; AdamW (torch's
implementation, so nothing is compiled on first use) with lr 1e-4; ``WarmupCosineLR`` with a
linear warmup decaying to a tenth; gradient clipping 0.5. ``grad_accum`` micro-batches per rank
per optimizer step (batches are sized in tokens by ``micro_batch_tokens``, not in samples).

A user file may write ``"auto"`` for any value we know better at run time (learning rate,
total steps, warmup, clipping, bf16), as in Hugging Face's DeepSpeed integration. Its
``gradient_accumulation_steps`` must be ``train.grad_accum`` (or ``"auto"``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import TrainConfig


def generated_config(cfg: TrainConfig, total_steps: int, bf16: bool) -> dict[str, Any]:
    warmup = min(cfg.warmup_steps, max(total_steps - 1, 0))
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": cfg.grad_accum,
        "gradient_clipping": cfg.grad_clip,
        "zero_optimization": {"stage": cfg.zero_stage},
        "bf16": {"enabled": bf16},
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": cfg.lr, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.0, "torch_adam": True},
        },
        "scheduler": {
            "type": "WarmupCosineLR",
            "params": {
                "total_num_steps": max(total_steps, 1),
                "warmup_num_steps": max(warmup, 1),  # DeepSpeed refuses 0 ...
                "warmup_type": "linear",
                "warmup_min_ratio": 0.0 if warmup else 1.0,  # ... so no warmup is a warmup at full lr
                "cos_min_ratio": 0.1,
            },
        },
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def fill_auto(user: Any, ours: Any) -> Any:
    """Replace every ``"auto"`` in the user's config with the generated value at the same place."""
    if isinstance(user, dict):
        return {k: fill_auto(v, ours.get(k) if isinstance(ours, dict) else None) for k, v in user.items()}
    if user == "auto":
        if ours is None:
            raise ConfigError(
                'the DeepSpeed config says "auto" where eagle3 has no value to put',
                fix="write the value out in your --deepspeed-config file",
            )
        return ours
    return user


def read_user_file(path: str | Path) -> str:
    """The text of the user's DeepSpeed config, or one ConfigError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"DeepSpeed config not found: {path}", fix="pass an existing JSON file") from None


def deepspeed_config(cfg: TrainConfig, total_steps: int, bf16: bool) -> dict[str, Any]:
    """The config the engine runs with: the user's file (autos filled) or the generated one."""
    ours = generated_config(cfg, total_steps, bf16)
    if cfg.deepspeed_config is None:
        return ours
    path = Path(cfg.deepspeed_config)
    try:
        user = json.loads(read_user_file(path))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"DeepSpeed config is not valid JSON: {exc}", path=str(path)) from None
    user = fill_auto(user, ours)
    user.setdefault("train_micro_batch_size_per_gpu", 1)
    accumulation = user.setdefault("gradient_accumulation_steps", cfg.grad_accum)
    if accumulation != cfg.grad_accum:
        # the loop runs grad_accum micro-batches per step and counts the steps with it: another
        # value here would train several times the data and save checkpoints in mid-step
        raise ConfigError(
            f"the DeepSpeed config says gradient_accumulation_steps {accumulation} "
            f"but train.grad_accum is {cfg.grad_accum}",
            path=str(path),
            fix=f'write "auto" there, or set train.grad_accum to {accumulation} in the recipe',
        )
    return user
