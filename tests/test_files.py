"""Files are what they seem: a lock never follows a link, a stage's folder is cleared for real,
and a full disk is one error naming the folder.

The full disk is real: a 256 KiB tmpfs mounted for the test (``tests/full_disk.py``).
"""

import pytest

from eagle3_core.errors import StageError
from eagle3_core.run.fsio import DiskFullError, atomic_path, remove_tree
from eagle3_core.run.lock import acquire, release
from tests.full_disk import fill, small_disk


@pytest.fixture
def disk(tmp_path):
    """A folder on its own 256 KiB tmpfs."""
    with small_disk(tmp_path / "disk", "256k") as mount:
        yield mount


def test_a_lock_that_is_a_symlink_is_refused_and_what_it_points_to_is_untouched(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / ".lock").symlink_to(precious)

    with pytest.raises(StageError, match=r"\.lock is a symbolic link") as error:
        acquire(stage)

    assert precious.read_text() == "keep me\n"
    assert "delete the link" in str(error.value)


def test_a_symlinked_folder_is_cleared_as_a_link_and_what_it_points_to_is_kept(tmp_path):
    other = tmp_path / "other-run-checkpoints"
    (other / "step-00000029").mkdir(parents=True)
    stage = tmp_path / "drafter"
    stage.mkdir()
    (stage / "checkpoints").symlink_to(other)

    remove_tree(stage / "checkpoints")

    assert not (stage / "checkpoints").exists() and not (stage / "checkpoints").is_symlink()
    assert (other / "step-00000029").is_dir()  # another run's: not this stage's to empty


def test_training_with_another_config_discards_a_symlinked_checkpoints_folder_for_real(tmp_path):
    from eagle3_core.run.driver import drive
    from eagle3_core.run.manifest import StageManifest, write_manifest
    from eagle3_core.stages.train.stage import TrainStage
    from tests.work_stage import WorkStage

    other = tmp_path / "elsewhere"
    (other / "step-00000029").mkdir(parents=True)
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "checkpoints").symlink_to(other)
    write_manifest(drafter, StageManifest(stage="train", status="complete", config_hash="old"))

    drive(WorkStage(drafter, lambda manifest: None, changed_outputs=TrainStage.outputs))  # the driver clears them

    assert not (drafter / "checkpoints").is_symlink() and not (drafter / "checkpoints").exists()  # nothing to resume


def test_a_full_disk_at_the_lock_is_one_error_naming_the_folder(disk):
    fill(disk)
    with pytest.raises(DiskFullError, match=f"no space left on the disk of {disk / 'stage'}"):
        acquire(disk / "stage")
    release(disk / "stage")


def test_a_full_disk_inside_a_write_is_one_error_and_leaves_the_old_file_and_no_temp(disk):
    (disk / "manifest.json").write_text("old\n")
    fill(disk)

    with pytest.raises(DiskFullError, match=f"no space left on the disk of {disk}") as error:
        with atomic_path(disk / "manifest.json") as tmp:
            tmp.write_bytes(b"\1" * 65536)

    assert "the stage resumes from its finished shards" in str(error.value)
    assert (disk / "manifest.json").read_text() == "old\n"
    assert not list(disk.glob("*.tmp"))


def test_reconstruct_clears_a_symlinked_stats_folder_as_a_link_and_keeps_what_it_points_to(tmp_path):
    from eagle3_core.run.driver import drive
    from eagle3_core.run.manifest import StageManifest, write_manifest
    from eagle3_core.stages.reconstruct.stage import ReconstructStage
    from tests.work_stage import WorkStage

    other = tmp_path / "other-run-stats"
    other.mkdir()
    (other / "part-00000.json").write_text("{}")
    out = tmp_path / "sequences"
    out.mkdir()
    (out / "stats").symlink_to(other)
    (out / "part-00000.parquet").write_bytes(b"")
    write_manifest(out, StageManifest(stage="reconstruct", status="complete", config_hash="old"))

    drive(WorkStage(out, lambda manifest: None, changed_outputs=ReconstructStage.outputs))  # the driver clears them

    assert (other / "part-00000.json").exists()  # the glob through the link deleted it
    assert not (out / "stats").is_symlink() and not list(out.glob("part-*"))


def test_a_writer_that_hides_the_errno_on_a_full_disk_is_still_one_error_naming_the_folder(disk):
    import torch
    from safetensors.torch import save_file

    fill(disk)
    with pytest.raises(DiskFullError, match=f"no space left on the disk of {disk} \\(No space left on device\\)"):
        with atomic_path(disk / "vocab.safetensors") as tmp:
            save_file({"counts": torch.zeros(65536)}, str(tmp))  # a SafetensorError: only its words say so


def test_torch_save_on_a_full_disk_is_one_error_naming_the_folder(disk):
    import torch

    from eagle3_core.run.fsio import no_space_as_error

    fill(disk)
    with pytest.raises(DiskFullError, match=f"no space left on the disk of {disk}"):  # a bare RuntimeError
        with no_space_as_error(disk):
            torch.save({"states": torch.zeros(65536)}, disk / "optim_states.pt")


def test_a_runtime_error_on_a_disk_with_room_stays_what_it_is(tmp_path):
    from eagle3_core.run.fsio import no_space_as_error

    with pytest.raises(RuntimeError, match="a bug"):
        with no_space_as_error(tmp_path):
            raise RuntimeError("a bug")
