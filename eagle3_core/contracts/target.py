"""The target's ``config.json`` facts, read without loading weights (so every check comes before
minutes of loading).

One precedence everywhere: a multimodal wrapper (Kimi-K2.5) keeps its language model's sizes
under ``text_config``, and those are the ones that count (the states, the vocabulary and the
drafter are the language model's), whatever the outer config also says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eagle3_core.contracts.folder import required
from eagle3_core.errors import InputError

CONFIG = "config.json"


@dataclass(frozen=True)
class TargetFacts:
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int


def language_config(path: str | Path) -> dict:
    """The language model's config: ``text_config`` when the target has one, else the whole file."""
    config_file = required(
        Path(path) / CONFIG, f"target {CONFIG}", "point --target at a local Hugging Face model directory"
    )
    config = json.loads(config_file.read_text(encoding="utf-8"))
    return config.get("text_config") or config


def read_target_facts(path: str | Path) -> TargetFacts:
    config = language_config(path)
    try:
        return TargetFacts(int(config["hidden_size"]), int(config["num_hidden_layers"]), int(config["vocab_size"]))
    except KeyError as exc:
        raise InputError(f"the target's {CONFIG} lacks {exc}", path=str(Path(path) / CONFIG)) from None
