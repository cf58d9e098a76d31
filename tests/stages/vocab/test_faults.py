"""vocab over a damaged sequences/ folder: one line naming the part and its fix, nothing written."""

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eagle3_core.errors import InputError
from eagle3_core.stages.vocab.config import VocabConfig
from eagle3_core.stages.vocab.stage import run_vocab
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import cli_error, error_line
from tests.faults import flip, list_shards, refused_while_held, snapshot, truncate
from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer
from tests.stages.vocab.test_vocab import write_sequences

ROWS = [([128000, 10, 11, 12, 128009], [0, 0, 1, 1, 1]), ([128000, 10, 12, 12], [0, 1, 1, 1])] * 200


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return build_family_tokenizer(FAMILIES["llama3"], tmp_path_factory.mktemp("tok") / "llama3")


@pytest.fixture
def earlier_run(llama_dir, tmp_path):
    """sequences/ and a vocab/ built from it with another draft size (so a new run must redo it)."""
    write_sequences(tmp_path / "seq", ROWS)
    run_vocab(VocabConfig(draft_vocab_size=2), TargetConfig(path=str(llama_dir)), tmp_path / "seq", tmp_path / "vocab")
    return tmp_path / "seq" / "part-00000.parquet", tmp_path / "vocab"


def test_a_truncated_sequences_part_is_one_line_naming_it_and_the_vocab_folder_is_untouched(
    prefect_api, llama_dir, earlier_run, tmp_path, capsys
):
    part, vocab = earlier_run
    before = snapshot(vocab)
    truncate(part)
    err = vocab_cli(part, vocab, llama_dir, capsys)
    assert error_line(err).startswith(
        "error: damaged reconstruct shard part-00000.parquet: not a readable Parquet file"
    )
    assert (
        f"file: {part}" in err and "fix: delete it and rerun `eagle3 reconstruct`: the stage redoes that shard" in err
    )
    assert snapshot(vocab) == before


def test_a_part_damaged_inside_fails_naming_it_and_leaves_the_manifest_failed_not_running(llama_dir, earlier_run):
    part, vocab = earlier_run
    data = bytearray(part.read_bytes())
    footer = pq.ParquetFile(part).metadata.serialized_size + 8
    data[4 : len(data) - footer] = b"\xff" * (len(data) - footer - 4)  # every page, footer intact
    part.write_bytes(bytes(data))
    with pytest.raises(InputError, match="damaged reconstruct shard part-00000.parquet") as err:
        run_vocab(VocabConfig(draft_vocab_size=3), TargetConfig(path=str(llama_dir)), part.parent, vocab)
    assert err.value.path == str(part)
    assert json.loads((vocab / "manifest.json").read_text())["status"] == "failed"


@pytest.fixture
def listed_run(llama_dir, tmp_path):
    """Two sequences parts under a complete manifest that lists them (as reconstruct leaves them),
    and a vocab/ built from them with another draft size (so a new run must redo it)."""
    write_sequences(tmp_path / "seq", ROWS)
    shutil.copy(tmp_path / "seq" / "part-00000.parquet", tmp_path / "seq" / "part-00001.parquet")
    list_shards(tmp_path / "seq", "reconstruct", "part-*.parquet")
    run_vocab(VocabConfig(draft_vocab_size=2), TargetConfig(path=str(llama_dir)), tmp_path / "seq", tmp_path / "vocab")
    return tmp_path / "seq" / "part-00001.parquet", tmp_path / "vocab"


def vocab_cli(part, vocab, llama_dir, capsys, *first: str) -> str:
    return cli_error(
        [
            *first,
            "vocab",
            "--input",
            str(part.parent),
            "--tokenizer",
            str(llama_dir),
            "--out",
            str(vocab),
            "--draft-vocab-size",
            "3",
        ],
        capsys,
    )


@pytest.mark.parametrize(
    "fault, flags, why",
    [
        ("truncated", (), "{cut} bytes, its manifest recorded {size} (truncated or overwritten)"),
        ("deleted", (), "the file is missing (its folder's manifest lists it)"),
        ("rotten", ("--verify",), "its blake2b checksum differs from its manifest's (the bytes changed)"),
    ],
)
def test_a_listed_part_truncated_deleted_or_rotten_is_named_and_vocab_is_untouched(
    prefect_api, llama_dir, listed_run, capsys, fault, flags, why
):
    part, vocab = listed_run
    before, size = snapshot(vocab), part.stat().st_size
    {"truncated": truncate, "deleted": Path.unlink, "rotten": flip}[fault](part)
    err = vocab_cli(part, vocab, llama_dir, capsys, *flags)
    assert error_line(err) == "error: damaged reconstruct shard part-00001.parquet: " + why.format(
        cut=size // 2, size=size
    )
    assert "fix: delete it and rerun `eagle3 reconstruct`: the stage redoes that shard" in err
    assert snapshot(vocab) == before


def test_a_concurrent_run_into_the_same_vocab_folder_refuses_and_changes_nothing(
    prefect_api, llama_dir, listed_run, capsys
):
    part, vocab = listed_run
    refused_while_held(vocab, lambda: vocab_cli(part, vocab, llama_dir, capsys))


def doctor_shard_name(folder: Path, name: str) -> None:
    """A shard name added by hand to the folder's complete manifest."""
    raw = json.loads((folder / "manifest.json").read_text())
    raw["shards"][name] = next(iter(raw["shards"].values()))
    (folder / "manifest.json").write_text(json.dumps(raw))


def test_a_shard_name_leading_outside_sequences_is_a_damaged_manifest_and_nothing_outside_is_stat(
    llama_dir, listed_run
):
    part, vocab = listed_run
    before = snapshot(vocab)
    doctor_shard_name(part.parent, "../../../../etc/hostname")
    with pytest.raises(InputError) as err:
        run_vocab(VocabConfig(draft_vocab_size=3), TargetConfig(path=str(llama_dir)), part.parent, vocab)
    assert err.value.message == (
        f"damaged reconstruct manifest {part.parent / 'manifest.json'}: "
        "shard name '../../../../etc/hostname' leads outside its folder ('..')"
    )
    assert "hostname" not in err.value.fix and snapshot(vocab) == before


def test_the_vocab_command_names_a_doctored_sequences_manifest_in_one_line(prefect_api, llama_dir, listed_run, capsys):
    part, vocab = listed_run
    doctor_shard_name(part.parent, "../../../../etc/hostname")
    err = vocab_cli(part, vocab, llama_dir, capsys)
    assert error_line(err) == (
        f"error: damaged reconstruct manifest {part.parent / 'manifest.json'}: "
        "shard name '../../../../etc/hostname' leads outside its folder ('..')"
    )
    assert "fix: delete it and rerun `eagle3 reconstruct`: the stage writes it again" in err
