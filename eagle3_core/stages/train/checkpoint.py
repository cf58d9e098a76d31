"""DeepSpeed checkpoints under drafter/checkpoints/: save every N steps and at the end, resume from the last.

Layout: ``checkpoints/step-00000040/`` (DeepSpeed's own files: module, optimizer, scheduler and
our client state) and ``checkpoints/latest`` naming the newest tag, which DeepSpeed writes only
after the tag's files are saved, so a run killed mid-save resumes from the previous one. The
frozen target embedding is not saved (it is reloaded from the target). The client state holds
``step`` and ``micro_step`` (micro-batches consumed), which fix where the data order resumes.

Resuming never unpickles code. A drafter folder may come from elsewhere, and DeepSpeed loads its
files with ``torch.load(weights_only=False)``, which runs whatever a pickle asks. ``resume``
routes every load through ``torch.load(weights_only=True)`` with only DeepSpeed's own plain
records allowed (``safe_globals``); a file that holds anything else is refused, named, before
any of it runs. The name in ``latest`` must be a tag (``step-NNNNNNNN``) of a folder beside it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eagle3_core.errors import InputError

TAG_PREFIX = "step-"
TAG_PATTERN = re.compile(r"step-\d{8}")
REFUSED_FIX = (
    "resume only from checkpoints you made: delete drafter/checkpoints/ to train from the start, "
    "or use --init-from with an exported drafter (safetensors)"
)


def tag(step: int) -> str:
    return f"{TAG_PREFIX}{step:08d}"


def latest_tag(ckpt_dir: str | Path) -> str | None:
    """The tag ``latest`` names, checked: a tag, and a folder directly inside ``ckpt_dir``."""
    latest = Path(ckpt_dir) / "latest"
    if not latest.exists():
        return None
    name = latest.read_text(encoding="utf-8", errors="replace").strip()
    if not TAG_PATTERN.fullmatch(name):
        raise InputError(
            f"checkpoints/latest names {name[:60]!r}, not a checkpoint tag (step-NNNNNNNN)",
            path=str(latest),
            fix=REFUSED_FIX,
        )
    folder = Path(ckpt_dir) / name
    if not folder.is_dir() or folder.resolve().parent != Path(ckpt_dir).resolve():
        raise InputError(
            f"checkpoints/latest names {name}, which is not a folder in {ckpt_dir}", path=str(latest), fix=REFUSED_FIX
        )
    return name


def save(engine, ckpt_dir: str | Path, step: int, client_state: dict[str, Any], keep: int) -> None:
    """Save a checkpoint for ``step`` on every rank, then drop all but the newest ``keep``."""
    engine.save_checkpoint(str(ckpt_dir), tag=tag(step), client_state=client_state, exclude_frozen_parameters=True)
    if engine.global_rank == 0:
        tags = sorted(p for p in Path(ckpt_dir).glob(f"{TAG_PREFIX}*") if p.is_dir())
        for old in tags[:-keep]:
            shutil.rmtree(old, ignore_errors=True)


def resume(engine, ckpt_dir: str | Path) -> dict[str, Any] | None:
    """Load the newest checkpoint into the engine; its client state, or None for a fresh start."""
    name = latest_tag(ckpt_dir)
    if name is None:
        return None
    with weights_only(engine):
        path, client = engine.load_checkpoint(str(ckpt_dir), tag=name, load_module_strict=False)
    if path is None:
        return None
    return client


def safe_globals() -> list:
    """The only non-tensor records DeepSpeed's ZeRO checkpoints hold (found by loading ours)."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]


def load_weights_only(path: str, map_location=None) -> Any:
    """``torch.load`` that refuses any pickled code, naming the file."""
    import pickle

    import torch

    with torch.serialization.safe_globals(safe_globals()):
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as exc:
            found = re.search(r"GLOBAL (\S+)", str(exc))
            what = found.group(1) if found else "an object that is not a tensor or a plain record"
            raise InputError(
                f"checkpoint file holds {what}, which eagle3 refuses to unpickle (it could run code)",
                path=str(path),
                fix=REFUSED_FIX,
            ) from None


@contextlib.contextmanager
def weights_only(engine) -> Iterator[None]:
    """Every checkpoint load of ``engine`` (and any stray ``torch.load``) with weights_only=True."""
    original, forced = engine.checkpoint_engine.load, os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    engine.checkpoint_engine.load = load_weights_only
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"  # torch honours it even where a caller passed False
    try:
        yield
    finally:
        engine.checkpoint_engine.load = original
        if forced is None:
            os.environ.pop("TORCH_FORCE_WEIGHTS_ONLY_LOAD", None)
        else:
            os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = forced
