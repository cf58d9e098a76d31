"""The one stage lifecycle: one writer per folder (real processes), skip rules, shard checksums,
failures recorded, rejects counted the same way everywhere."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from eagle3_core.run.checksums import ShardError, file_digest
from eagle3_core.run.driver import drive
from eagle3_core.run.fsio import atomic_path, stray_temps, temp_name
from eagle3_core.run.lock import folder_lock
from eagle3_core.run.manifest import read_manifest
from eagle3_core.run.rejects import Rejects
from tests.work_stage import WorkStage, run_work

ROOT = Path(__file__).resolve().parents[2]

# A stage run in its own process: writes one shard, then waits for `go` before completing.
STAGE_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from eagle3_core.errors import Eagle3Error
    from eagle3_core.run.fsio import atomic_path
    from tests.work_stage import run_work

    out, go = Path(sys.argv[1]), Path(sys.argv[2])

    def work(manifest):
        with atomic_path(out / "part-00000.bin", record=True) as tmp:
            tmp.write_bytes(b"x" * 1000)
        print("writing", flush=True)
        while not go.exists():
            time.sleep(0.05)
        manifest.counts = {"rows": 1}

    try:
        run_work(out, work, shards=("part-*.bin",))
    except Eagle3Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
""")


def start_stage(out: Path, go: Path) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", STAGE_SCRIPT, str(out), str(go)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout.readline().strip() == "writing", process.stderr.read()
    return process


def assert_free_to_another_process(folder: Path) -> None:
    """Another process takes the folder's lock at once: this one let it go."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from eagle3_core.run.lock import acquire; acquire(sys.argv[1])",
            str(folder),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr


def run_stage_process(out: Path, go: Path) -> subprocess.CompletedProcess:
    """The stage script in a process of its own, to its end."""
    return subprocess.run(
        [sys.executable, "-c", STAGE_SCRIPT, str(out), str(go)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
        capture_output=True,
        timeout=120,
    )


def test_a_second_process_into_the_same_folder_refuses_at_once_naming_the_holder(tmp_path):
    out, go = tmp_path / "out", tmp_path / "go"
    first = start_stage(out, go)
    try:
        second = run_stage_process(out, go)
    finally:
        go.touch()
    assert second.returncode == 2, second.stderr
    first_line = second.stderr.splitlines()[0]
    assert (
        first_line == f"error: another run is writing {out.resolve()} (pid {first.pid} on host {socket.gethostname()})"
    )
    assert "fix: wait for it to finish, or pass another --out" in second.stderr
    assert second.stdout == ""  # it wrote nothing
    assert first.wait(timeout=120) == 0, first.stderr.read()
    manifest = read_manifest(out)
    assert manifest.status == "complete" and manifest.counts == {"rows": 1}
    assert manifest.shards["part-00000.bin"].bytes == 1000


def test_the_lock_of_a_killed_holder_is_free_at_once(tmp_path):
    out, go = tmp_path / "out", tmp_path / "go"
    first = start_stage(out, go)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    go.touch()

    again = run_stage_process(out, go)

    assert again.returncode == 0, again.stderr
    assert read_manifest(out).status == "complete"


def test_the_lock_is_reentrant_within_one_process_and_free_after(tmp_path):
    with folder_lock(tmp_path), folder_lock(tmp_path):
        pass
    assert_free_to_another_process(tmp_path)


def write_shard(out: Path, name: str, data: bytes) -> None:
    with atomic_path(out / name, record=True) as tmp:
        tmp.write_bytes(data)


def make_work(out: Path, calls: list):
    def work(manifest):
        calls.append(1)
        write_shard(out, "part-00000.bin", b"a" * 100)
        write_shard(out, "part-00001.bin", b"b" * 100)
        manifest.counts = {"rows": 2}

    return work


def run_demo(out: Path, calls: list, verify: bool | None = None):
    return run_work(out, make_work(out, calls), shards=("part-*.bin",), inputs={"in": "x"}, verify=verify)


def test_the_manifest_lists_each_shard_with_the_size_and_checksum_it_was_written_with(tmp_path):
    manifest = run_demo(tmp_path, [])
    assert set(manifest.shards) == {"part-00000.bin", "part-00001.bin"}
    assert manifest.shards["part-00001.bin"].blake2b == file_digest(tmp_path / "part-00001.bin")
    assert manifest.status == "complete" and "total" in manifest.timings


def test_a_complete_stage_with_its_shards_whole_is_skipped(tmp_path):
    calls = []
    run_demo(tmp_path, calls)
    run_demo(tmp_path, calls, verify=True)
    assert len(calls) == 1


def test_a_truncated_shard_stops_the_skip_naming_it_and_the_fix(tmp_path):
    run_demo(tmp_path, [])
    (tmp_path / "part-00001.bin").write_bytes(b"b" * 10)

    with pytest.raises(ShardError) as error:
        run_demo(tmp_path, [])

    assert str(error.value).splitlines()[0] == (
        "shard part-00001.bin: 10 bytes, its manifest recorded 100 (truncated or overwritten)"
    )
    assert "fix: delete it and rerun: the stage redoes that shard" in str(error.value)


def test_a_rotten_shard_of_the_same_size_is_found_by_verify_only(tmp_path):
    calls = []
    run_demo(tmp_path, calls)
    (tmp_path / "part-00000.bin").write_bytes(b"a" * 50 + b"X" * 50)

    run_demo(tmp_path, calls)  # sizes hold: skipped without reading the shards
    with pytest.raises(ShardError, match="part-00000.bin: its blake2b checksum differs"):
        run_demo(tmp_path, calls, verify=True)
    assert len(calls) == 1


def test_verify_can_be_asked_for_a_whole_run_through_the_environment(tmp_path, monkeypatch):
    run_demo(tmp_path, [])
    (tmp_path / "part-00000.bin").write_bytes(b"Z" * 100)
    monkeypatch.setenv("EAGLE3_VERIFY", "1")
    with pytest.raises(ShardError, match="part-00000.bin"):
        run_demo(tmp_path, [])


def test_a_deleted_shard_is_redone_by_the_next_run(tmp_path):
    calls = []
    run_demo(tmp_path, calls)
    (tmp_path / "part-00001.bin").unlink()

    manifest = run_demo(tmp_path, calls)

    assert len(calls) == 2 and manifest.status == "complete"
    assert (tmp_path / "part-00001.bin").stat().st_size == 100


def test_a_shard_changed_between_its_write_and_completion_is_refused(tmp_path):
    def work(manifest):
        write_shard(tmp_path, "part-00000.bin", b"a" * 100)
        time.sleep(0.01)  # a later mtime for the damage below, on coarse-clock file systems
        (tmp_path / "part-00000.bin").write_bytes(b"a" * 99)

    with pytest.raises(ShardError, match="shard part-00000.bin changed after it was written"):
        run_work(tmp_path, work, shards=("part-*.bin",))
    assert read_manifest(tmp_path).status == "failed"


def test_a_failed_run_is_recorded_failed_and_lets_the_folder_go(tmp_path):
    def work(manifest):
        raise ValueError("boom\nsecond line")

    with pytest.raises(ValueError):
        run_work(tmp_path, work)

    manifest = read_manifest(tmp_path)
    assert manifest.status == "failed" and manifest.details["error"] == "ValueError: boom"
    assert_free_to_another_process(tmp_path)


def test_rejects_are_recorded_the_same_way_for_every_stage(tmp_path):
    def work(manifest):
        manifest.counts = {"rows": 5}
        return Rejects.total_of([{"overlong": 2}, Rejects({"empty": 1, "overlong": 1})])

    manifest = run_work(tmp_path, work)

    assert manifest.counts == {"rows": 5, "rejected": 4}
    assert manifest.details["reject_reasons"] == {"empty": 1, "overlong": 3}


def test_temp_names_are_unique_and_a_live_process_temp_is_never_a_stray(tmp_path):
    final = tmp_path / "part-00000.parquet"
    assert temp_name(final) != temp_name(final)
    mine = temp_name(final)
    mine.write_bytes(b"")
    dead = tmp_path / "part-00001.parquet.999999999-abcd.tmp"  # beyond any pid_max
    dead.write_bytes(b"")
    assert stray_temps(tmp_path) == [dead]


def test_a_busy_folder_is_one_clear_error_line_from_the_cli(prefect_api, tmp_path, capsys, monkeypatch):
    from flows.cli import main
    from tests.faults import held
    from tests.stages.vocab.test_vocab import write_sequences

    write_sequences(tmp_path / "seq", [([1, 2], [1, 1])])
    tokenizer = ROOT / "tests" / "golden"  # any directory: the lock is met before the tokenizer is read
    argv = ["vocab", "--input", str(tmp_path / "seq"), "--tokenizer", str(tokenizer), "--out", str(tmp_path / "vocab")]
    monkeypatch.setattr("sys.argv", ["eagle3", *argv])
    with held(tmp_path / "vocab") as pid, pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    line = f"error: another run is writing {(tmp_path / 'vocab').resolve()} (pid {pid} on host {socket.gethostname()})"
    assert line in capsys.readouterr().err.splitlines()
    assert not (tmp_path / "vocab" / "manifest.json").exists()


def test_an_interrupted_run_stays_running_like_a_killed_one_and_lets_the_folder_go(tmp_path):
    def work(manifest):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_work(tmp_path, work)

    assert read_manifest(tmp_path).status == "running"
    assert_free_to_another_process(tmp_path)


class UnitStage(WorkStage):
    """Three units, each writing its shard and rejecting one row; ``refuse`` makes ``plan`` refuse."""

    def __init__(self, out: Path, refuse: bool = False, config_hash: str = "cfg") -> None:
        super().__init__(out, lambda manifest: Rejects({"late": 1}), shards=("part-*.bin",))
        self.outputs = ("part-*.bin", "scratch")
        self.refuse, self.config_hash, self.ran = refuse, config_hash, []

    def plan(self):
        if self.refuse:
            raise ValueError("no room")
        return [0, 1, 2]

    def run(self, unit):
        self.ran.append(unit)
        write_shard(self.out_dir, f"part-{unit:05d}.bin", b"u" * 10)
        return Rejects({"bad": 1})


def test_the_driver_runs_every_unit_and_sums_their_rejects_with_the_finishs(tmp_path):
    stage = UnitStage(tmp_path)
    manifest = drive(stage)
    assert stage.ran == [0, 1, 2] and len(manifest.shards) == 3
    assert manifest.details["reject_reasons"] == {"bad": 3, "late": 1} and manifest.counts["rejected"] == 4
    assert {"plan", "run", "finish", "total"} <= set(manifest.timings)


def test_changed_keys_clear_the_outputs_files_and_folders_before_the_plan(tmp_path):
    drive(UnitStage(tmp_path))
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "state.bin").write_bytes(b"old")
    (tmp_path / "keep.txt").write_text("not an output")

    with pytest.raises(ValueError, match="no room"):
        drive(UnitStage(tmp_path, refuse=True, config_hash="other"))

    assert not list(tmp_path.glob("part-*.bin")) and not (tmp_path / "scratch").exists()
    assert (tmp_path / "keep.txt").exists()
    assert read_manifest(tmp_path).status == "failed"  # never the cleared run's `complete`


def test_a_refusal_in_keys_or_in_the_plan_of_a_fresh_folder_leaves_no_manifest(tmp_path):
    class BadKeys(UnitStage):
        def keys(self):
            raise ValueError("wrong input")

    with pytest.raises(ValueError, match="wrong input"):
        drive(BadKeys(tmp_path / "a"))
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="no room"):
        drive(UnitStage(tmp_path / "b", refuse=True))
    assert read_manifest(tmp_path / "b") is None


def test_an_interrupted_unit_leaves_running_and_the_next_run_resumes(tmp_path):
    class Interrupted(UnitStage):
        def run(self, unit):
            if unit == 1:
                raise KeyboardInterrupt
            return super().run(unit)

    with pytest.raises(KeyboardInterrupt):
        drive(Interrupted(tmp_path))
    assert read_manifest(tmp_path).status == "running"
    assert drive(UnitStage(tmp_path)).status == "complete"


def test_a_failing_unit_leaves_the_stages_figures_so_far_in_the_failed_manifest(tmp_path):
    class Failing(UnitStage):
        def run(self, unit):
            if unit == 1:
                raise ValueError("server gone")
            return super().run(unit)

        def stopped(self, manifest):
            manifest.counts["units_done"] = len(self.ran)

    with pytest.raises(ValueError, match="server gone"):
        drive(Failing(tmp_path))
    manifest = read_manifest(tmp_path)
    assert manifest.status == "failed" and manifest.details["error"] == "ValueError: server gone"
    assert manifest.counts == {"units_done": 1}


def test_a_stage_whose_outputs_are_empty_keeps_its_files_when_the_keys_change(tmp_path):
    """generate's rows carry their own keys: a changed config reuses them, and its finish drops the rest."""

    class Keeping(UnitStage):
        def __init__(self, out, config_hash="cfg"):
            super().__init__(out, config_hash=config_hash)
            self.outputs = ()

    drive(Keeping(tmp_path))
    write_shard(tmp_path, "part-00009.bin", b"old")
    manifest = drive(Keeping(tmp_path, config_hash="other"))
    assert manifest.status == "complete" and (tmp_path / "part-00009.bin").exists()
