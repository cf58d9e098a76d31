"""extract onto a disk that fills mid-run (something else takes the space after the first shard):
one DiskFullError naming hidden/, never a raw OSError, and a run that resumes from its finished
shards once there is room. The disk is a real tmpfs (tests/full_disk.py)."""

import pytest

from eagle3_core.run.fsio import DiskFullError
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.extract.stage import run_extract
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import RecordingReporter
from tests.full_disk import fill, small_disk
from tests.stages.extract.helpers import write_sequences


class FillAfterFirstShard(RecordingReporter):
    """Fills the disk once the first shard is written, as another writer on the disk would."""

    def __init__(self, disk):
        super().__init__()
        self.disk = disk

    def log(self, message):
        super().log(message)
        if "shard-00000" in message and not (self.disk / "filler").exists():
            fill(self.disk)


def test_a_disk_full_mid_run_is_one_error_naming_hidden_and_the_run_resumes_once_there_is_room(tiny_llama, tmp_path):
    write_sequences(tmp_path / "seq", [[200, 200], [200, 200], [200, 200]])  # 3 shards of about 200 KiB
    cfg = ExtractConfig(layers=[1, 3, 4], device="cpu", shard_tokens=400)
    with small_disk(tmp_path / "disk", "4m") as disk:
        hidden = disk / "hidden"
        with pytest.raises(DiskFullError) as error:
            run_extract(cfg, TargetConfig(path=str(tiny_llama)), tmp_path / "seq", hidden, FillAfterFirstShard(disk))

        assert str(error.value).splitlines()[0] == f"no space left on the disk of {hidden} (No space left on device)"
        done = {p.name: p.stat().st_mtime_ns for p in hidden.glob("shard-*.safetensors")}
        assert list(done) == ["shard-00000.safetensors"]
        (disk / "filler").unlink()  # room again
        manifest = run_extract(cfg, TargetConfig(path=str(tiny_llama)), tmp_path / "seq", hidden)

        assert manifest.status == "complete" and read_manifest(hidden).status == "complete"
        assert hidden.joinpath("shard-00000.safetensors").stat().st_mtime_ns == done["shard-00000.safetensors"]
        assert len(list(hidden.glob("shard-*.safetensors"))) == 3
