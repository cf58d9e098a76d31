"""`run_vocab`: sequences/ -> vocab/vocab.safetensors (d2t, t2d, counts) and the coverage reached.

The target vocabulary size comes from the target's config.json (``vocab_size``: the rows of
its embedding, often padded past the tokenizer) or else the tokenizer's length. A complete
manifest for the same config, sequences and tokenizer returns at once.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.base import stable_hash
from eagle3_core.contracts import sequences
from eagle3_core.errors import ConfigError, InputError
from eagle3_core.lifecycle import StageLifecycle, run_stage
from eagle3_core.manifest import StageManifest, input_fingerprint
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.reconstruct.tokenizer import load_tokenizer, target_vocab_size, tokenizer_fingerprint
from eagle3_core.target import TargetConfig
from eagle3_core.vocab.build import count_supervised, save, select
from eagle3_core.vocab.config import VocabConfig

STAGE = "vocab"
VOCAB_FILE = "vocab.safetensors"


def run_vocab(
    cfg: VocabConfig,
    target: TargetConfig,
    sequences_dir: str | Path,
    out_dir: str | Path,
    reporter: Reporter | None = None,
) -> StageManifest:
    """Count supervised tokens over ``sequences_dir`` and write the draft vocabulary to ``out_dir``."""
    reporter = reporter or NullReporter()
    if not target.path:
        raise ConfigError("no tokenizer: target.path is not set", fix="pass --tokenizer PATH (a local directory)")
    files = sequences.parts(sequences_dir)
    for file in files:  # a torn part is named before this folder is touched
        sequences.num_rows(file)
    fingerprint = tokenizer_fingerprint(target.path)
    inputs = {"sequences": input_fingerprint(sequences_dir), "tokenizer": fingerprint}
    life = StageLifecycle(
        STAGE,
        out_dir,
        stable_hash({"vocab": cfg.content_hash()}),
        inputs,
        shards=(VOCAB_FILE,),
        versions=("safetensors", "numpy"),
        reporter=reporter,
    )
    return run_stage(life, lambda manifest: build_vocab(cfg, target, files, out_dir, manifest, reporter))


def build_vocab(
    cfg: VocabConfig,
    target: TargetConfig,
    files: list[Path],
    out_dir: str | Path,
    manifest: StageManifest,
    reporter: Reporter,
) -> None:
    """The stage's work: count, select, save; the figures go into ``manifest``."""
    target_vocab = target_vocab_size(target.path, load_tokenizer(target.path, target.trust_remote_code))
    counts = count_supervised(files, target_vocab)
    if counts.sum() == 0:
        raise InputError(
            f"the sequences in {files[0].parent} hold no supervised tokens",
            fix="check the reconstruct manifest: every loss_mask is 0",
        )
    vocab = select(counts, cfg.draft_vocab_size)
    save(vocab, Path(out_dir) / VOCAB_FILE)
    manifest.counts = {
        "supervised_tokens": int(counts.sum()),
        "distinct_tokens": int((counts > 0).sum()),
        "shards": len(files),
    }
    manifest.details = {
        "draft_vocab_size": int(len(vocab.d2t)),
        "target_vocab_size": target_vocab,
        "coverage": round(vocab.coverage, 6),
        "tokenizer": tokenizer_fingerprint(target.path),
        "requested_draft_vocab_size": cfg.draft_vocab_size,
    }
    reporter.log(
        f"vocab: {len(vocab.d2t)} draft ids cover {vocab.coverage:.2%} of {int(counts.sum())} supervised tokens"
    )
