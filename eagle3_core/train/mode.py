"""train.mode auto: store the states (offline) when they fit on disk, stream them (online-vllm) when not.

The decision is made before any state is computed, from sizes alone: the sequences' token count
(a Parquet column), the target's hidden size (config.json) and the free space where hidden/
would go, with extract's headroom. A complete hidden/ is always used as it is.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.manifest import read_manifest
from eagle3_core.target import TargetConfig
from eagle3_core.train.config import TrainConfig


def hidden_is_complete(hidden_dir: str | Path | None) -> bool:
    manifest = read_manifest(hidden_dir) if hidden_dir else None
    return manifest is not None and manifest.status == "complete"


def offline_fits(
    target: TargetConfig, sequences_dir: str | Path, hidden_dir: str | Path, headroom: float
) -> tuple[bool, str]:
    """(whether hidden/ fits, the storage line saying why) for every token of sequences/."""
    from eagle3_core.contracts import sequences
    from eagle3_core.contracts.target import read_target_facts
    from eagle3_core.extract.storage import storage_line

    tokens = sum(
        int(sum(sequences.read(p, ["num_tokens"]).column(0).to_pylist())) for p in sequences.parts(sequences_dir)
    )
    line, need, free = storage_line(tokens, read_target_facts(target.require_path()).hidden_size, hidden_dir)
    return need * headroom <= free, line


def choose_mode(
    cfg: TrainConfig, target: TargetConfig, sequences_dir: str | Path, hidden_dir: str | Path, headroom: float
) -> tuple[TrainConfig, str]:
    """``cfg`` with mode auto resolved, and the reason; any other mode is returned as it is."""
    if cfg.mode != "auto":
        return cfg, f"train.mode is {cfg.mode}"
    if hidden_is_complete(hidden_dir):
        return cfg.model_copy(update={"mode": "offline"}), f"hidden/ is complete at {hidden_dir}: offline"
    fits, line = offline_fits(target, sequences_dir, hidden_dir, headroom)
    mode = "offline" if fits else "online-vllm"
    verdict = "they fit: offline" if fits else f"they do not fit (x{headroom} headroom): online-vllm, nothing stored"
    return cfg.model_copy(update={"mode": mode}), f"{line}; {verdict}"
