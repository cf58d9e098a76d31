"""Train-stage inputs built once per session from a tiny random Llama (see builders.py)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.stages.train import builders


@dataclass(frozen=True)
class TinyRun:
    target: Path
    sequences: Path
    hidden: Path
    vocab: Path


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> TinyRun:
    root = tmp_path_factory.mktemp("tiny-run")
    target = builders.build_target(root / "target")
    sequences = builders.build_sequences(target, root / "sequences")
    return TinyRun(
        target,
        sequences,
        builders.build_hidden(target, sequences, root / "hidden"),
        builders.build_vocab(sequences, root / "vocab"),
    )
