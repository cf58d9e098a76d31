"""reconstruct flow: generations/ -> sequences/."""

from __future__ import annotations

from prefect import flow

from eagle3_core.manifest import StageManifest
from eagle3_core.reconstruct.config import ReconstructConfig
from eagle3_core.target import TargetConfig
from tasks.reconstruct import reconstruct_task


@flow(name="reconstruct", log_prints=True)
def reconstruct_flow(cfg: ReconstructConfig, target: TargetConfig, generations_dir: str, out_dir: str) -> StageManifest:
    """Token ids (think tokens in place) and loss masks for every accepted generation."""
    return reconstruct_task(cfg, target, str(generations_dir), str(out_dir))
