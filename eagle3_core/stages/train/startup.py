"""The trainer's start without what DeepSpeed imports for features eagle3 never uses.

Two imports were most of a trainer's start on 2 cores (``benchmarks/bench_trainer_import.py``,
benchmarks/train.md "A trainer's start"), each for a feature eagle3 does not use:

- ``import deepspeed`` imports mlflow (its client, pandas) in ``deepspeed/autotuning/autotuner.py``,
  whenever mlflow is installed (eagle3's tracking installs it), only to log autotuning experiments;
- ``deepspeed.initialize`` imports DeepSpeed's Muon optimizer, whose ``@torch.compile`` decorator
  builds TorchInductor's compiler on import, for an optimizer eagle3's config never names.

Guarantee: the trainer's own code and DeepSpeed's run as before. mlflow is hidden from DeepSpeed's
import only (the trainer's tracking imports it as usual afterwards), and ``torch.compile`` becomes
a no-op (``TORCHDYNAMO_DISABLE=1``) only where nothing in the run compiles: the generated
DeepSpeed config (AdamW, no compile section) and an attention that is not ``flex``, the one part
eagle3 compiles. A user's DeepSpeed file, ``flex``, or ``TORCHDYNAMO_DISABLE`` already set keep
torch's default.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

from eagle3_core.stages.train.config import TrainConfig


def import_deepspeed():
    """``import deepspeed`` with its autotuner's ``import mlflow`` failing as if mlflow were absent
    (a ``None`` in ``sys.modules``); the entry goes afterwards, so a later ``import mlflow`` works."""
    if "mlflow" in sys.modules:  # already imported: nothing to save
        import deepspeed

        return deepspeed
    sys.modules["mlflow"] = None  # type: ignore[assignment]
    try:
        import deepspeed
    finally:
        del sys.modules["mlflow"]
    return deepspeed


def compiles(cfg: TrainConfig) -> bool:
    """Whether anything in this run may call ``torch.compile``: flex attention, or a user's DeepSpeed
    file (its optimizer or its ``compile`` section are not ours to know)."""
    return cfg.ttt_attention == "flex" or cfg.deepspeed_config is not None


def skip_unused_compilers(cfg: TrainConfig, environ: MutableMapping[str, str] = os.environ) -> None:
    """``TORCHDYNAMO_DISABLE=1`` in the trainer's environment for a run that compiles nothing, before
    DeepSpeed is imported."""
    if not compiles(cfg):
        environ.setdefault("TORCHDYNAMO_DISABLE", "1")
