"""Prefect task of the vocab stage: a decorator and a call into the core."""

from __future__ import annotations

from datetime import timedelta

from prefect import task

from eagle3_core.manifest import StageManifest
from eagle3_core.target import TargetConfig
from eagle3_core.vocab.config import VocabConfig
from eagle3_core.vocab.stage import run_vocab
from tasks.common import PrefectReporter, publish_manifest, stage_cache_key


@task(name="vocab", cache_key_fn=stage_cache_key, cache_expiration=timedelta(days=30), persist_result=True)
def vocab_task(cfg: VocabConfig, target: TargetConfig, sequences_dir: str, out_dir: str) -> StageManifest:
    """Count supervised tokens and write the draft vocabulary with its coverage."""
    manifest = run_vocab(cfg, target, sequences_dir, out_dir, reporter=PrefectReporter("vocab"))
    publish_manifest(manifest, title="vocab")
    return manifest
