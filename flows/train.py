"""train flow: hidden/ (or sequences/ + target) + vocab/ -> drafter/ (checkpoints, export)."""

from __future__ import annotations

from prefect import flow

from eagle3_core.manifest import StageManifest
from eagle3_core.target import TargetConfig
from eagle3_core.train.config import TrainConfig
from tasks.train import train_task


@flow(name="train", log_prints=True)
def train_flow(
    cfg: TrainConfig,
    target: TargetConfig,
    hidden_dir: str | None,
    vocab_dir: str,
    out_dir: str,
    sequences_dir: str | None = None,
) -> StageManifest:
    """The EAGLE-3 drafter, trained with DeepSpeed, exported for vLLM and SGLang."""
    return train_task(
        cfg,
        target,
        None if hidden_dir is None else str(hidden_dir),
        str(vocab_dir),
        str(out_dir),
        sequences_dir=None if sequences_dir is None else str(sequences_dir),
    )
