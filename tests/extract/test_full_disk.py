"""extract onto a disk that fills mid-run: one `error:` line naming the folder, exit 2, and a run
that resumes from its finished shards once there is room (the disk is a real tmpfs)."""

from eagle3_core.manifest import read_manifest
from tests.cli_helpers import cli_error, error_line
from tests.extract.helpers import write_sequences
from tests.full_disk import resize, small_disk


def extract(tiny_llama, seq, hidden) -> list[str]:
    return ["extract", "--input", str(seq), "--target", str(tiny_llama), "--out", str(hidden), "--layers", "1,3,4"] + [
        "--shard-tokens",
        "400",
        "--device",
        "cpu",
    ]


def test_a_disk_full_mid_run_is_one_error_line_and_the_run_resumes_once_there_is_room(
    prefect_api, tiny_llama, tmp_path, capsys
):
    from flows.cli import main

    write_sequences(tmp_path / "seq", [[200, 200], [200, 200], [200, 200]])  # 3 shards of about 200 KiB
    with small_disk(tmp_path / "disk", "300k") as disk:
        hidden = disk / "hidden"
        err = cli_error(extract(tiny_llama, tmp_path / "seq", hidden), capsys)

        assert error_line(err) == f"error: no space left on the disk of {hidden} (No space left on device)"
        assert read_manifest(hidden).status in ("running", "failed")
        done = sorted(p.name for p in hidden.glob("shard-*.safetensors"))
        assert done and len(done) < 3  # it stopped part-way
        resize(disk, "4m")
        assert_runs(main, extract(tiny_llama, tmp_path / "seq", hidden))

        assert read_manifest(hidden).status == "complete"
        assert len(list(hidden.glob("shard-*.safetensors"))) == 3


def assert_runs(main, argv) -> None:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.argv", ["eagle3", *argv])
        try:
            main()
        except SystemExit as exc:
            assert exc.code in (0, None)
