"""A stale build lock of DeepSpeed's CPU communication op, cleared before a trainer starts.

On a CPU, DeepSpeed's trainer builds its shared-memory op (``deepspeed_shm_comm``) into torch's
extension cache, and torch's ``cpp_extension`` guards that build with a plain ``lock`` file
(``torch.utils.file_baton.FileBaton``: created with O_EXCL, removed when the build ends; every
other process polls until it is gone, with no time limit). A build killed midway (Ctrl-C on a
first run, a killed CI job) leaves the lock, and every later trainer then sleeps with an empty
``train.log``: no line, no error.

Guarantee: before a trainer starts on a CPU, a lock older than ``STALE_AFTER_S`` is removed with
one warning line naming it and its age; a younger one is kept and explained in one line (another
run is building the op); no lock, no line. On a GPU nothing is looked at: DeepSpeed builds this
op for its CPU accelerator only. Cost: importing torch in the launching process (1.7 s on 2 cores),
once per launch, beside a trainer that takes far longer to start.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from eagle3_core.errors import StageError

# ShareMemCommBuilder.NAME (deepspeed/ops/op_builder/cpu/comm.py): the folder torch builds it in.
SHM_OP = "deepspeed_shm_comm"
# A build of the op takes about a minute on 2 cores (56 s in the demo's train stage on a fresh
# machine, benchmarks/demo.md), so a lock ten times as old belongs to no live build.
STALE_AFTER_S = 600.0


def deepspeed_on_cpu() -> bool:
    """Whether DeepSpeed will pick its CPU accelerator, the only one that builds the op.

    ``DS_ACCELERATOR`` names it when set; otherwise DeepSpeed picks CUDA when a CUDA device is
    seen, as the trainer's ``loop.pick_device`` does. Another accelerator (XPU, NPU) taken for a
    CPU here costs nothing: it never builds the op, so there is no lock to find.
    """
    named = os.environ.get("DS_ACCELERATOR")
    if named:
        return named == "cpu"
    import torch

    return not torch.cuda.is_available()


def shm_build_lock() -> Path:
    """The lock torch takes to build the op: ``<root>/deepspeed_shm_comm/lock``.

    The root is ``TORCH_EXTENSIONS_DIR``, else ``~/.cache/torch_extensions/py311_cpu`` (``cu128``
    for a CUDA build of torch); torch's own function, so the folder is the one its build uses. It
    creates the empty folder when missing, as the build itself would.
    """
    from torch.utils.cpp_extension import _get_build_directory

    return Path(_get_build_directory(SHM_OP, verbose=False)) / "lock"


def lock_age_s(lock: Path) -> float | None:
    """Seconds since the lock was taken (torch writes it once, at the build's start); None if absent."""
    try:
        return time.time() - lock.stat().st_mtime
    except FileNotFoundError:  # no lock, or the build ended between the look and now
        return None


def remove_lock(lock: Path) -> None:
    """Remove a stale lock; one that cannot go is an error, since the trainer would wait on it forever."""
    try:
        lock.unlink(missing_ok=True)
    except OSError as exc:
        raise StageError(
            f"a stale DeepSpeed build lock cannot be removed ({exc.strerror}); the trainer would wait on it forever",
            fix=f"remove it as its owner: rm {lock}",
            path=str(lock),
        ) from exc


def clear_stale_build_lock() -> str | None:
    """The line to report about the op's build lock, or None; a lock older than ``STALE_AFTER_S`` is removed."""
    if not deepspeed_on_cpu():
        return None
    lock = shm_build_lock()
    age = lock_age_s(lock)
    if age is None:
        return None
    if age < STALE_AFTER_S:
        return (
            f"train: DeepSpeed is building its CPU communication op (lock {lock}, {age:.0f} s old): "
            "another run is building it and this trainer waits until it ends (about a minute); "
            "if no other run is, the lock is left from a killed build: remove it"
        )
    remove_lock(lock)
    return (
        f"train: warning: removed the stale DeepSpeed build lock {lock} ({age / 60:.0f} min old), left by a "
        f"killed build: safe, no build of the op runs {STALE_AFTER_S / 60:.0f} min (one takes about 1 min)"
    )
