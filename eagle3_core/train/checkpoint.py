"""DeepSpeed checkpoints under drafter/checkpoints/: save every N steps and at the end, resume from the last.

Layout: ``checkpoints/step-00000040/`` (DeepSpeed's own files: module, optimizer, scheduler and
our client state) and ``checkpoints/latest`` naming the newest tag, which DeepSpeed writes only
after the tag's files are saved, so a run killed mid-save resumes from the previous one. The
frozen target embedding is not saved (it is reloaded from the target). The client state holds
``step`` and ``micro_step`` (micro-batches consumed), which fix where the data order resumes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

TAG_PREFIX = "step-"


def tag(step: int) -> str:
    return f"{TAG_PREFIX}{step:08d}"


def latest_tag(ckpt_dir: str | Path) -> str | None:
    latest = Path(ckpt_dir) / "latest"
    if not latest.exists():
        return None
    name = latest.read_text().strip()
    return name if (Path(ckpt_dir) / name).is_dir() else None


def save(engine, ckpt_dir: str | Path, step: int, client_state: dict[str, Any], keep: int) -> None:
    """Save a checkpoint for ``step`` on every rank, then drop all but the newest ``keep``."""
    engine.save_checkpoint(str(ckpt_dir), tag=tag(step), client_state=client_state,
                           exclude_frozen_parameters=True)
    if engine.global_rank == 0:
        tags = sorted(p for p in Path(ckpt_dir).glob(f"{TAG_PREFIX}*") if p.is_dir())
        for old in tags[:-keep]:
            shutil.rmtree(old, ignore_errors=True)


def resume(engine, ckpt_dir: str | Path) -> dict[str, Any] | None:
    """Load the newest checkpoint into the engine; its client state, or None for a fresh start."""
    name = latest_tag(ckpt_dir)
    if name is None:
        return None
    path, client = engine.load_checkpoint(str(ckpt_dir), tag=name, load_module_strict=False)
    if path is None:
        return None
    return client
