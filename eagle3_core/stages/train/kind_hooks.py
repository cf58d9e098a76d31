"""The trainer's side of a drafter kind: the hooks every kind's training module declares as ``TRAINING``.

The loop, the held-out evaluation and the export call these and never branch on the kind;
``drafter/kinds.py`` names the module that holds each kind's hooks.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eagle3_core.drafter.kinds import KINDS


@dataclass(frozen=True)
class KindTraining:
    # (inputs, cfg, init_from) -> a fresh drafter (seeded by cfg.seed), the target's frozen embedding and the vocab
    build: Callable[..., Any]
    # (module, head, batch, cfg) -> (loss, StepCounts): one micro-batch's loss; StepCounts per draft position
    forward: Callable[..., Any]
    # (drafter, export_dir, cfg) -> export_dir: the serving checkpoint, written atomically
    export: Callable[..., Any]
    # cfg -> the card's and summary's facts of the kind's training (k, block size, ...)
    facts: Callable[..., dict]
    # (cfg, inputs) -> None, or a ConfigError naming the field and the limit the target sets
    check: Callable[..., None] = lambda cfg, inputs: None


def training_for(kind: str) -> KindTraining:
    return importlib.import_module(KINDS[kind].training).TRAINING
