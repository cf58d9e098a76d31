"""EAGLE-3's training hooks (``drafter/model.py``; the TTT loss of ``train/loss.py``)."""

from __future__ import annotations

from eagle3_core.train.kinds import KindTraining


def build(inputs, cfg, init_from: str | None = None):
    from eagle3_core.train.build import build_drafter

    return build_drafter(inputs, cfg.seed, init_from, cfg.drafter.model_dump(), cfg.variant.architecture())


def forward(module, head, batch, cfg):
    from eagle3_core.train.loop import forward_batch

    return forward_batch(module, head, batch, cfg)


def export(drafter, export_dir, cfg):
    from eagle3_core.train.export import export_drafter

    return export_drafter(drafter, export_dir, cfg.ships_embedding)


def facts(cfg) -> dict:
    return {"ttt_steps": cfg.ttt_steps}


TRAINING = KindTraining(build=build, forward=forward, export=export, facts=facts)
