"""`run_vocab`: sequences/ -> vocab/vocab.safetensors (d2t, t2d, counts) and the coverage reached.

The target vocabulary size comes from the target's config.json (``vocab_size``: the rows of
its embedding, often padded past the tokenizer) or else the tokenizer's length. A complete
manifest for the same config, sequences and tokenizer returns at once.
"""

from __future__ import annotations

import time
from pathlib import Path

from eagle3_core.base import stable_hash
from eagle3_core.errors import ConfigError, InputError
from eagle3_core.manifest import (StageManifest, input_fingerprint, read_manifest, runtime_versions,
                                  write_manifest)
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.readers import sequences
from eagle3_core.reconstruct.tokenizer import load_tokenizer, target_vocab_size, tokenizer_fingerprint
from eagle3_core.target import TargetConfig
from eagle3_core.vocab.build import count_supervised, save, select
from eagle3_core.vocab.config import VocabConfig

STAGE = "vocab"
VOCAB_FILE = "vocab.safetensors"


def run_vocab(cfg: VocabConfig, target: TargetConfig, sequences_dir: str | Path, out_dir: str | Path,
              reporter: Reporter | None = None) -> StageManifest:
    """Count supervised tokens over ``sequences_dir`` and write the draft vocabulary to ``out_dir``."""
    reporter = reporter or NullReporter()
    started = time.monotonic()
    if not target.path:
        raise ConfigError("no tokenizer: target.path is not set", fix="pass --tokenizer PATH (a local directory)")
    files = sequences.parts(sequences_dir)
    for file in files:          # a torn part is named before this folder is touched
        sequences.num_rows(file)
    fingerprint = tokenizer_fingerprint(target.path)
    inputs = {"sequences": input_fingerprint(sequences_dir), "tokenizer": fingerprint}
    config_hash = stable_hash({"vocab": cfg.content_hash()})
    previous = read_manifest(out_dir)
    if previous is not None and previous.is_complete_for(config_hash, inputs) and (Path(out_dir) / VOCAB_FILE).is_file():
        reporter.log("vocab: complete for these inputs, skipped")
        return previous
    manifest = StageManifest(stage=STAGE, status="running", config_hash=config_hash, inputs=inputs,
                             versions=runtime_versions("safetensors", "numpy"))
    write_manifest(out_dir, manifest)
    try:
        vocab, target_vocab, counts = _build(cfg, target, files, sequences_dir)
    except BaseException:
        manifest.status = "failed"      # never leave `running` behind a run that stopped
        write_manifest(out_dir, manifest)
        raise
    save(vocab, Path(out_dir) / VOCAB_FILE)
    manifest.counts = {"supervised_tokens": int(counts.sum()), "distinct_tokens": int((counts > 0).sum()),
                       "shards": len(files)}
    manifest.details = {"draft_vocab_size": int(len(vocab.d2t)), "target_vocab_size": target_vocab,
                        "coverage": round(vocab.coverage, 6), "tokenizer": fingerprint,
                        "requested_draft_vocab_size": cfg.draft_vocab_size}
    manifest.timings = {"total": round(time.monotonic() - started, 3)}
    manifest.status = "complete"
    write_manifest(out_dir, manifest)
    reporter.log(f"vocab: {len(vocab.d2t)} draft ids cover {vocab.coverage:.2%} of {int(counts.sum())} supervised tokens")
    return manifest


def _build(cfg: VocabConfig, target: TargetConfig, files: list[Path], sequences_dir) -> tuple:
    """(draft vocab, target vocab size, counts) from the supervised tokens of ``files``."""
    target_vocab = target_vocab_size(target.path, load_tokenizer(target.path, target.trust_remote_code))
    counts = count_supervised(files, target_vocab)
    if counts.sum() == 0:
        raise InputError(f"the sequences in {sequences_dir} hold no supervised tokens",
                         fix="check the reconstruct manifest: every loss_mask is 0")
    return select(counts, cfg.draft_vocab_size), target_vocab, counts
