"""reconstruct over a damaged generations/ folder, or into a busy sequences/ folder: one line
naming the file (or the holder) and the fix; exit 2; nothing in sequences/ changes."""

from pathlib import Path

import pytest

from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import cli_error, error_line
from tests.faults import flip, list_shards, refused_while_held, snapshot, truncate
from tests.stages.reconstruct.families import FAMILIES
from tests.stages.reconstruct.records import record, write_generations

USER = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture
def earlier_run(family_dirs, tmp_path):
    """generations/ (two accepted parts) and sequences/ made from it at another max length."""
    gen = write_generations(
        tmp_path / "gen", [record(f"s{i}", USER, "Two and two.", " 4.") for i in range(40)], shard_rows=20
    )
    target = TargetConfig(path=str(family_dirs["qwen3"]), **FAMILIES["qwen3"].target)
    run_reconstruct(ReconstructConfig(max_length=256), target, gen, tmp_path / "seq")
    return gen, tmp_path / "seq"


def reconstruct_cli(gen, seq, family_dirs, capsys, *first: str) -> str:
    return cli_error(
        [
            *first,
            "reconstruct",
            "--input",
            str(gen),
            "--tokenizer",
            str(family_dirs["qwen3"]),
            "--family",
            "qwen3",
            "--out",
            str(seq),
            "--max-length",
            "512",
        ],
        capsys,
    )


def test_a_truncated_generations_part_is_one_line_naming_it_and_sequences_are_untouched(
    prefect_api, family_dirs, earlier_run, capsys
):
    gen, seq = earlier_run
    before = snapshot(seq)
    truncate(gen / "accepted" / "part-00001.parquet")
    err = reconstruct_cli(gen, seq, family_dirs, capsys)
    assert error_line(err).startswith("error: damaged generate shard part-00001.parquet: not a readable Parquet file")
    assert "fix: delete it and rerun `eagle3 generate`: the stage redoes that shard" in err
    assert snapshot(seq) == before


@pytest.mark.parametrize(
    "fault, flags, why",
    [
        ("deleted", (), "the file is missing (its folder's manifest lists it)"),
        ("rotten", ("--verify",), "its blake2b checksum differs from its manifest's (the bytes changed)"),
    ],
)
def test_a_listed_part_deleted_or_rotten_is_named_and_sequences_are_untouched(
    prefect_api, family_dirs, earlier_run, capsys, fault, flags, why
):
    gen, seq = earlier_run
    list_shards(gen, "generate", "accepted/part-*.parquet")  # as generate's lifecycle leaves it
    before, part = snapshot(seq), gen / "accepted" / "part-00001.parquet"
    {"deleted": Path.unlink, "rotten": flip}[fault](part)
    err = reconstruct_cli(gen, seq, family_dirs, capsys, *flags)
    assert error_line(err) == f"error: damaged generate shard part-00001.parquet: {why}"
    assert snapshot(seq) == before


def test_a_concurrent_run_into_the_same_sequences_folder_refuses_and_changes_nothing(
    prefect_api, family_dirs, earlier_run, capsys
):
    gen, seq = earlier_run
    refused_while_held(seq, lambda: reconstruct_cli(gen, seq, family_dirs, capsys))
