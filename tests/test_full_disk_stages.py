"""A full disk, stage by stage, as a user meets it at the command line: one `error:` line naming
the stage's folder, exit 2, no traceback, and a manifest a rerun resumes from once there is room.

The disk is real: a small tmpfs mounted on the stage's folder (``tests/full_disk.py``). "Full
from the start" fills it before the command; "full mid-run" fills it as the first shard is
lands (in process: the hook wraps ``os.replace``, through which every write goes), or, for the trainer (a DeepSpeed
subprocess), gives it room for everything before the first checkpoint and not that checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import cli_error, error_line
from tests.full_disk import fill, small_disk


def assert_disk_full(argv: list[str], out: Path, capsys) -> str:
    """Run `eagle3 ARGV`; assert exit 2, no traceback, and one `error:` line naming ``out`` (or a
    folder inside it) as the full disk's."""
    err = cli_error(argv, capsys)
    line = error_line(err)
    assert line.startswith(f"error: no space left on the disk of {out}"), err
    assert "fix: free space there" in err
    return err


def status(folder: Path) -> str | None:
    """The manifest's status, None when there is none (a run refused at the lock writes none)."""
    manifest = folder / "manifest.json"
    return json.loads(manifest.read_text())["status"] if manifest.exists() else None


def assert_resumable(folder: Path) -> None:
    """What a full disk leaves is what the next run resumes from: no manifest, `running` (the disk
    refused even the `failed` record) or `failed` with the disk's error; never `complete`."""
    state = status(folder)
    assert state in (None, "running", "failed"), state
    if state == "failed":
        assert "no space left" in json.loads((folder / "manifest.json").read_text())["details"]["error"]


def fill_after(monkeypatch, disk: Path, pattern: str) -> None:
    """Fill ``disk`` once the first file matching ``pattern`` lands on it (every write is renamed
    into place, ``fsio.atomic_path``), as another writer taking the space mid-run would."""
    import os

    replace = os.replace

    def replace_then_fill(src, dst, *args, **kwargs):
        replace(src, dst, *args, **kwargs)
        dst = Path(dst)
        if dst.is_relative_to(disk) and dst.match(pattern) and not (disk / "filler").exists():
            fill(disk)

    monkeypatch.setattr(os, "replace", replace_then_fill)


# --- vocab -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer

    return build_family_tokenizer(FAMILIES["llama3"], tmp_path_factory.mktemp("tok") / "llama3")


def vocab_argv(seq: Path, tokenizer: Path, out: Path) -> list[str]:
    return ["vocab", "--input", str(seq), "--tokenizer", str(tokenizer), "--out", str(out), "--draft-vocab-size", "3"]


@pytest.mark.parametrize("when", ["from the start", "mid-run"])
def test_vocab_on_a_full_disk_is_one_error_naming_vocab_and_reruns_once_there_is_room(
    prefect_api, llama_dir, tmp_path, capsys, monkeypatch, when
):
    from tests.stages.vocab.test_faults import ROWS
    from tests.stages.vocab.test_vocab import write_sequences

    write_sequences(tmp_path / "seq", ROWS)
    with small_disk(tmp_path / "disk", "8m") as disk:  # vocab.safetensors: 1.1 MB of counts for 128K ids
        out = disk / "vocab"
        # mid-run, `running` is on disk: the full disk meets safetensors' writer, which hides the errno
        full_then_freed(
            disk, out, when, "manifest.json", vocab_argv(tmp_path / "seq", llama_dir, out), monkeypatch, capsys
        )


def full_then_freed(disk: Path, out: Path, when: str, written: str, argv: list[str], monkeypatch, capsys) -> None:
    """``argv`` into ``out`` on a full ``disk`` (from the start, or once ``written`` is written):
    one error naming ``out`` and a resumable folder; with room again, the same command completes."""
    if when == "from the start":
        out.mkdir()
        fill(disk)
    else:
        fill_after(monkeypatch, disk, written)
    assert_disk_full(argv, out, capsys)
    assert_resumable(out)
    monkeypatch.undo()
    (disk / "filler").unlink()
    cli_ok(argv)
    assert status(out) == "complete"


def cli_ok(argv: list[str]) -> None:
    from click.testing import CliRunner

    from flows.cli import cli

    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output


# --- reconstruct -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer

    return build_family_tokenizer(FAMILIES["qwen3"], tmp_path_factory.mktemp("tok") / "qwen3")


def reconstruct_argv(gen: Path, tokenizer: Path, out: Path) -> list[str]:
    return ["reconstruct", "--input", str(gen), "--tokenizer", str(tokenizer), "--family", "qwen3", "--out", str(out)]


@pytest.mark.parametrize("when", ["from the start", "mid-run"])
def test_reconstruct_on_a_full_disk_is_one_error_naming_sequences_and_resumes(
    prefect_api, qwen3_dir, tmp_path, capsys, monkeypatch, when
):
    from tests.stages.reconstruct.records import record, write_generations

    user = [{"role": "user", "content": "What is 2 + 2?"}]
    records = [record(f"s{i}", user, "Two and two. " * 40, " 4.") for i in range(60)]
    gen = write_generations(tmp_path / "gen", records, shard_rows=20)
    with small_disk(tmp_path / "disk", "4m") as disk:
        out = disk / "sequences"
        full_then_freed(disk, out, when, "part-*.parquet", reconstruct_argv(gen, qwen3_dir, out), monkeypatch, capsys)
        assert json.loads((out / "manifest.json").read_text())["counts"]["sequences"] == 60


# --- extract -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from tests.stages.extract.helpers import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "model")


def extract_argv(seq: Path, target: Path, out: Path) -> list[str]:
    return [
        *("extract", "--input", str(seq), "--target", str(target), "--out", str(out)),
        *("--layers", "1,3,4", "--device", "cpu", "--shard-tokens", "400", "--engine", "transformers"),
    ]


@pytest.mark.parametrize("when", ["from the start", "mid-run"])
def test_extract_on_a_full_disk_is_one_error_naming_hidden_and_resumes(
    prefect_api, tiny_llama, tmp_path, capsys, monkeypatch, when
):
    from tests.stages.extract.helpers import write_sequences

    write_sequences(tmp_path / "seq", [[200, 200], [200, 200], [200, 200]])
    with small_disk(tmp_path / "disk", "4m") as disk:
        out = disk / "hidden"
        full_then_freed(
            disk, out, when, "shard-*.safetensors", extract_argv(tmp_path / "seq", tiny_llama, out), monkeypatch, capsys
        )
        assert len(list(out.glob("shard-*.safetensors"))) == 3


# --- evaluate (offline: the transformers loop; vLLM's own log folder is covered by the guard) --


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    from tests.stages.evaluate.models import make_chat_target, make_export

    target = make_chat_target(tmp_path_factory.mktemp("chat-target"))
    return target, make_export(tmp_path_factory.mktemp("chat-export"), target)


def evaluate_argv(target: Path, export: Path, out: Path) -> list[str]:
    return [
        *("evaluate", "--target", str(target), "--drafter", str(export), "--out", str(out)),
        *("--offline-only", "--max-tokens", "10", "-k", "2", "--threads", "1"),
    ]


@pytest.mark.parametrize("when", ["from the start", "mid-run"])
def test_evaluate_on_a_full_disk_is_one_error_naming_eval_and_reruns(
    prefect_api, chat, tmp_path, capsys, monkeypatch, when
):
    target, export = chat
    with small_disk(tmp_path / "disk", "4m") as disk:
        out = disk / "eval"
        full_then_freed(disk, out, when, "report.json", evaluate_argv(target, export, out), monkeypatch, capsys)


# --- generate: the streaming Parquet writer, mid-run -------------------------------------------


def generate_argv(src: Path, url: str, out: Path) -> list[str]:
    return [
        *("generate", "--input", str(src), "--base-url", url, "--out", str(out)),
        *("--retry-initial-wait", "0", "--no-progress", "--shard-rows", "5", "--concurrency", "1"),
    ]


@pytest.mark.parametrize("when", ["from the start", "mid-run"])
def test_generate_on_a_full_disk_is_one_error_naming_generations_and_resumes(
    prefect_api, fake_server, tmp_path, capsys, monkeypatch, when
):
    import polars as pl

    from tests.stages.generate.helpers import accepted, prompts, write_jsonl

    src = write_jsonl(tmp_path / "in.jsonl", prompts(30))
    with small_disk(tmp_path / "disk", "4m") as disk:
        out = disk / "generations"
        if when == "from the start":
            out.mkdir()
            fill(disk)
        else:  # polars' writer meets it, with the rows of the next shards in flight
            fill_after(monkeypatch, disk, "accepted/part-*.parquet")
        assert_disk_full(generate_argv(src, fake_server.url, out), out, capsys)
        assert_resumable(out)
        shards = sorted((out / "accepted").glob("part-*.parquet"))
        assert all(pl.read_parquet(f).height > 0 for f in shards) and not list(out.rglob("*.tmp"))
        monkeypatch.undo()
        (disk / "filler").unlink()
        cli_ok(generate_argv(src, fake_server.url, out))
        assert status(out) == "complete"
        assert accepted(out)["sample_id"].n_unique() == len(accepted(out)) == 30


# --- train: DeepSpeed's checkpoint writes, in the trainer process ------------------------------


@pytest.fixture(scope="module")
def tiny_train(tmp_path_factory):
    from tests.stages.train import builders

    root = tmp_path_factory.mktemp("tiny-train")
    target = builders.build_target(root / "target")
    sequences = builders.build_sequences(target, root / "sequences")
    return (
        target,
        builders.build_hidden(target, sequences, root / "hidden"),
        builders.build_vocab(sequences, root / "vocab"),
    )


def train_argv(inputs, out: Path) -> list[str]:
    target, hidden, vocab = inputs
    return [
        *("train", "--input", str(hidden), "--target", str(target), "--vocab", str(vocab), "--out", str(out)),
        *("--max-steps", "4", "--checkpoint-every", "2"),
    ]


@pytest.mark.slow
@pytest.mark.deepspeed
@pytest.mark.parametrize("when", ["from the start", "at the first checkpoint"])
def test_train_on_a_full_disk_is_one_error_naming_drafter_and_resumes(
    prefect_api, tiny_train, tmp_path, capsys, monkeypatch, when
):
    from tests.full_disk import resize

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # 512 KiB holds the run's spec, logs and metrics (about 60 KiB in pages) and not a checkpoint
    # (about 1 MB: DeepSpeed's model and optimizer states, written by torch.save)
    with small_disk(tmp_path / "disk", "512k") as disk:
        out = disk / "drafter"
        if when == "from the start":
            out.mkdir()
            fill(disk)
        assert_disk_full(train_argv(tiny_train, out), out, capsys)
        assert_resumable(out)
        if (disk / "filler").exists():
            (disk / "filler").unlink()
        resize(disk, "16m")
        cli_ok(train_argv(tiny_train, out))
        assert status(out) == "complete" and (out / "export" / "model.safetensors").exists()


# --- the pipeline (and so the demo, which is the pipeline on the toy recipe) -------------------


@pytest.mark.parametrize("when", ["from the start", "mid-run"])
def test_the_pipeline_on_a_full_disk_is_one_error_naming_the_stage_folder_and_resumes(
    prefect_api, fake_server, tmp_path, capsys, monkeypatch, when
):
    import yaml

    from tests.stages.generate.helpers import accepted, prompts, write_jsonl

    src = write_jsonl(tmp_path / "in.jsonl", prompts(30))
    recipe = tmp_path / "recipe.yaml"
    generate = {"prompts": {"input": str(src)}, "base_urls": [fake_server.url], "shard_rows": 5, "concurrency": 1}
    recipe.write_text(yaml.safe_dump({"stages": ["generate"], "generate": {**generate, "retry_initial_wait": 0}}))
    with small_disk(tmp_path / "disk", "4m") as disk:
        run = disk / "run"
        argv = ["pipeline", "--config", str(recipe), "--out", str(run)]
        if when == "from the start":
            run.mkdir()
            fill(disk)
            expected = run  # the run's own folder or the stage's inside it: both are named by it
        else:
            fill_after(monkeypatch, disk, "accepted/part-*.parquet")
            expected = run / "generations"
        assert_disk_full(argv, expected, capsys)
        assert_resumable(run / "generations")
        monkeypatch.undo()
        (disk / "filler").unlink()
        cli_ok(argv)
        assert status(run / "generations") == "complete" and len(accepted(run / "generations")) == 30
