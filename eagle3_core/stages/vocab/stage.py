"""`VocabStage`: sequences/ -> vocab/vocab.safetensors (d2t, t2d, counts) and the coverage reached.

The target vocabulary size comes from the target's config.json (``vocab_size``: the rows of
its embedding, often padded past the tokenizer) or else the tokenizer's length. A complete
manifest for the same config, sequences and tokenizer returns at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle3_core.contracts import sequences
from eagle3_core.contracts.details import VocabDetails
from eagle3_core.errors import InputError
from eagle3_core.run.driver import Stage, drive
from eagle3_core.run.manifest import StageManifest, input_fingerprint
from eagle3_core.run.progress import Reporter
from eagle3_core.stages.vocab.build import count_supervised, save, select
from eagle3_core.stages.vocab.config import VocabConfig
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.tokenizer import load_tokenizer, target_vocab_size, tokenizer_fingerprint

STAGE = "vocab"
VOCAB_FILE = "vocab.safetensors"


@dataclass
class VocabStage(Stage):
    """Count supervised tokens over ``sequences_dir`` and write the draft vocabulary to ``out_dir``."""

    name, shards, versions = STAGE, (VOCAB_FILE,), ("safetensors", "numpy")

    cfg: VocabConfig
    target: TargetConfig
    sequences_dir: str
    out_dir: str
    reporter: Reporter | None = None

    def keys(self) -> tuple[str, dict[str, str]]:
        self.target.require_path("--tokenizer")
        self.files = sequences.parts(self.sequences_dir)
        for file in self.files:  # a torn part is named before this folder is touched
            sequences.num_rows(file)
        inputs = {
            "sequences": input_fingerprint(self.sequences_dir),
            "tokenizer": tokenizer_fingerprint(self.target.path),
        }
        return self.key(vocab=self.cfg), inputs

    def run(self, unit: None) -> None:
        self.built = build_vocab(self.cfg, self.target, self.files, self.out_dir, self.reporter)

    def finish(self, manifest: StageManifest) -> None:
        manifest.counts, manifest.details = self.built


def build_vocab(
    cfg: VocabConfig, target: TargetConfig, files: list[Path], out_dir: Path, reporter: Reporter
) -> tuple[dict, dict]:
    """The stage's work: count, select, save; returns the manifest's counts and details."""
    target_vocab = target_vocab_size(target.path, load_tokenizer(target.path, target.trust_remote_code))
    counts = count_supervised(files, target_vocab)
    if counts.sum() == 0:
        raise InputError(
            f"the sequences in {files[0].parent} hold no supervised tokens",
            fix="check the reconstruct manifest: every loss_mask is 0",
        )
    vocab = select(counts, cfg.draft_vocab_size)
    save(vocab, Path(out_dir) / VOCAB_FILE)
    counts_out = {
        "supervised_tokens": int(counts.sum()),
        "distinct_tokens": int((counts > 0).sum()),
        "shards": len(files),
    }
    details = VocabDetails(
        draft_vocab_size=int(len(vocab.d2t)),
        target_vocab_size=target_vocab,
        coverage=round(vocab.coverage, 6),
        tokenizer=tokenizer_fingerprint(target.path),
        requested_draft_vocab_size=cfg.draft_vocab_size,
    ).dump()
    reporter.log(
        f"vocab: {len(vocab.d2t)} draft ids cover {vocab.coverage:.2%} of {int(counts.sum())} supervised tokens"
    )
    return counts_out, details


def run_vocab(*args, **kwargs) -> StageManifest:
    """The stage whole in this process (tests, benchmarks): ``drive(VocabStage(...))``."""
    return drive(VocabStage(*args, **kwargs))
