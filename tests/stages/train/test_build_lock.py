"""A lock left by a killed build of DeepSpeed's CPU op is cleared before the trainer starts, and a
live build's lock is kept and explained: otherwise the trainer waits on it forever, saying nothing."""

import os
import sys
import time
from pathlib import Path

import pytest

from eagle3_core.errors import StageError
from eagle3_core.stages.train import build_lock, launcher
from eagle3_core.stages.train.build_lock import STALE_AFTER_S, clear_stale_build_lock
from eagle3_core.stages.train.config import TrainConfig


@pytest.fixture
def extensions(tmp_path, monkeypatch) -> Path:
    """A private torch extension cache, and DeepSpeed on its CPU accelerator as on this machine."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    return tmp_path / "torch_extensions"


def make_lock(extensions: Path, age_s: float) -> Path:
    lock = extensions / "deepspeed_shm_comm" / "lock"  # where torch's FileBaton puts it under TORCH_EXTENSIONS_DIR
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.touch()
    taken = time.time() - age_s
    os.utime(lock, (taken, taken))
    return lock


def test_the_lock_looked_at_is_the_one_torch_builds_the_op_under(extensions):
    assert build_lock.shm_build_lock() == extensions / "deepspeed_shm_comm" / "lock"


def test_a_stale_lock_is_removed_with_one_warning_naming_it_and_its_age(extensions):
    lock = make_lock(extensions, age_s=STALE_AFTER_S + 25 * 60)
    line = clear_stale_build_lock()
    assert not lock.exists()
    assert line is not None and "\n" not in line
    assert line.startswith("train: warning: removed the stale DeepSpeed build lock ")
    assert str(lock) in line and "(35 min old)" in line and "no build of the op runs 10 min" in line


def test_a_fresh_lock_is_kept_and_the_line_says_a_build_is_in_progress(extensions):
    lock = make_lock(extensions, age_s=30)
    line = clear_stale_build_lock()
    assert lock.exists()
    assert line is not None and "\n" not in line
    assert line.startswith("train: DeepSpeed is building its CPU communication op")
    assert str(lock) in line and "another run is building it" in line


def test_no_lock_says_nothing(extensions):
    assert clear_stale_build_lock() is None


def test_on_a_gpu_accelerator_no_lock_is_looked_at(extensions, monkeypatch):
    monkeypatch.setenv("DS_ACCELERATOR", "cuda")  # DeepSpeed builds the shm op for its CPU accelerator only
    lock = make_lock(extensions, age_s=STALE_AFTER_S * 3)
    assert clear_stale_build_lock() is None
    assert lock.exists()


def test_the_cpu_decision_is_deepspeeds_own_where_ds_accelerator_is_unset(monkeypatch):
    from deepspeed.accelerator import get_accelerator

    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    assert build_lock.deepspeed_on_cpu() == (get_accelerator().device_name() == "cpu")


def test_a_stale_lock_that_cannot_be_removed_is_one_error_with_the_command_that_removes_it(extensions, monkeypatch):
    lock = make_lock(extensions, age_s=STALE_AFTER_S * 2)

    def refuse(self, missing_ok=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "unlink", refuse)
    with pytest.raises(StageError, match="cannot be removed \\(Permission denied\\)") as caught:
        clear_stale_build_lock()
    assert caught.value.fix == f"remove it as its owner: rm {lock}"


class Recorder:
    def __init__(self):
        self.lines = []

    def progress(self, stage, done, total, **figures):
        pass

    def log(self, message):
        self.lines.append(message)


def test_the_launcher_clears_the_lock_and_says_so_in_train_log_and_the_reporter(extensions, tmp_path, monkeypatch):
    lock = make_lock(extensions, age_s=STALE_AFTER_S * 2)
    monkeypatch.setattr(launcher, "trainer_command", lambda cfg, spec: [sys.executable, "-c", "print('trained')"])
    reporter = Recorder()
    ended = launcher.launch(TrainConfig(), tmp_path / "run_spec.json", reporter)
    assert ended.returncode == 0 and not lock.exists()
    assert reporter.lines[0].startswith("train: warning: removed the stale DeepSpeed build lock")
    assert reporter.lines[1:] == ["trained"]
    assert (tmp_path / "train.log").read_text().splitlines() == [reporter.lines[0], "trained"]
