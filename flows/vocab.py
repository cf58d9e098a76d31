"""vocab flow: sequences/ -> vocab/."""

from __future__ import annotations

from prefect import flow

from eagle3_core.manifest import StageManifest
from eagle3_core.target import TargetConfig
from eagle3_core.vocab.config import VocabConfig
from tasks.vocab import vocab_task


@flow(name="vocab", log_prints=True)
def vocab_flow(cfg: VocabConfig, target: TargetConfig, sequences_dir: str, out_dir: str) -> StageManifest:
    """The draft vocabulary: the most frequent supervised target tokens."""
    return vocab_task(cfg, target, str(sequences_dir), str(out_dir))
