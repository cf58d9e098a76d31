"""What a tracking backend needs to open (or reopen) a run: a module of its own, so the backends and
the package's front both import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunSpec:
    """What every backend needs to open (or reopen) the run."""

    out_dir: Path  # drafter/
    project: str = "eagle3"
    run_name: str | None = None
    wandb_entity: str | None = None
    wandb_mode: str = "auto"
    mlflow_tracking_uri: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # the run's config and facts, nested
    resume_step: int | None = None  # the checkpoint's step, None for a fresh run
    ids: dict[str, dict] = field(default_factory=dict)  # backend -> its ids, from the checkpoint
    reopen: bool = False  # add figures to a finished run (evaluate): nothing purged, no config sent again
