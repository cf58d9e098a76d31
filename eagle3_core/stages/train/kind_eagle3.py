"""EAGLE-3's training hooks (``drafter/model.py``; the TTT loss of ``train/loss.py``)."""

from __future__ import annotations

from eagle3_core.stages.train.kind_hooks import KindTraining


def build(inputs, cfg, init_from: str | None = None):
    from eagle3_core.drafter.attention_kernels import ttt_attention_for
    from eagle3_core.stages.train.build import build_drafter

    drafter = build_drafter(inputs, cfg.seed, init_from, cfg.drafter.model_dump(), cfg.variant.architecture())
    if cfg.ttt_attention != "blocked":
        drafter.attend = ttt_attention_for(cfg.ttt_attention, compiled=True)
    return drafter


def forward(module, head, batch, cfg):
    from eagle3_core.stages.train.loop import forward_batch

    return forward_batch(module, head, batch, cfg)


def export(drafter, export_dir, cfg):
    from eagle3_core.stages.train.export import export_drafter

    return export_drafter(drafter, export_dir, cfg.ships_embedding)


def facts(cfg) -> dict:
    return {"ttt_steps": cfg.ttt_steps}


def check(cfg, inputs) -> None:
    """flex runs compiled, through Triton: a GPU's path (PyTorch has no flex backward on the CPU)."""
    import torch

    from eagle3_core.errors import ConfigError

    if cfg.ttt_attention == "flex" and cfg.hostfile is None and not torch.cuda.is_available():
        raise ConfigError(
            "train.ttt_attention: flex trains only on a GPU (compiled flex_attention; PyTorch has no flex "
            "backward on the CPU), and this machine has none",
            fix="set train.ttt_attention: blocked (the default), or train on a GPU",
        )


TRAINING = KindTraining(build=build, forward=forward, export=export, facts=facts, check=check)
