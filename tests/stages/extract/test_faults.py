"""extract over a damaged sequences/ folder, and over a hidden/ shard that was cut short."""

import json
from pathlib import Path

import pytest

from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.extract.stage import run_extract
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import cli_error, error_line
from tests.faults import flip, list_shards, refused_while_held, snapshot, truncate
from tests.stages.extract.helpers import write_sequences

LAYERS = [1, 3, 4]


def test_a_truncated_sequences_part_is_one_line_naming_it_and_hidden_is_untouched(
    prefect_api, tiny_llama, tmp_path, capsys
):
    write_sequences(tmp_path / "seq", [[10, 20, 5], [7, 12]])
    run_extract(
        ExtractConfig(layers=LAYERS, shard_tokens=50),
        TargetConfig(path=str(tiny_llama)),
        tmp_path / "seq",
        tmp_path / "hidden",
    )  # an earlier run
    before = snapshot(tmp_path / "hidden")
    truncate(tmp_path / "seq" / "part-00001.parquet")
    err = extract_cli(tmp_path / "seq", tmp_path / "hidden", tiny_llama, capsys)
    assert error_line(err).startswith(
        "error: damaged reconstruct shard part-00001.parquet: not a readable Parquet file"
    )
    assert "fix: delete it and rerun `eagle3 reconstruct`: the stage redoes that shard" in err
    assert snapshot(tmp_path / "hidden") == before


def test_a_shard_cut_short_behind_an_intact_header_is_redone_on_resume(tiny_llama, tmp_path):
    write_sequences(tmp_path / "seq", [[10, 20, 5, 30]])
    cfg, target, out = (
        ExtractConfig(layers=LAYERS, shard_tokens=40),
        TargetConfig(path=str(tiny_llama)),
        tmp_path / "hidden",
    )
    run_extract(cfg, target, tmp_path / "seq", out)
    whole = snapshot(out)
    truncate(out / "shard-00000.safetensors", keep=0.9)  # the header (and its shard key) survive
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))  # as a killed run leaves it
    resumed = run_extract(cfg, target, tmp_path / "seq", out)
    assert resumed.details["shards_reused"] == resumed.counts["shards"] - 1
    assert {k: v for k, v in snapshot(out).items() if k.startswith("shard-")} == {
        k: v for k, v in whole.items() if k.startswith("shard-")
    }


@pytest.fixture
def earlier_run(tiny_llama, tmp_path):
    """sequences/ (two parts, listed in a complete manifest) and hidden/ made from it at another shard size."""
    write_sequences(tmp_path / "seq", [[10, 20, 5], [7, 12]])
    list_shards(tmp_path / "seq", "reconstruct", "part-*.parquet")
    run_extract(
        ExtractConfig(layers=LAYERS, shard_tokens=50),
        TargetConfig(path=str(tiny_llama)),
        tmp_path / "seq",
        tmp_path / "hidden",
    )
    return tmp_path / "seq", tmp_path / "hidden"


def extract_cli(seq, hidden, tiny_llama, capsys, *first: str) -> str:
    return cli_error(
        [
            *first,
            "extract",
            "--input",
            str(seq),
            "--target",
            str(tiny_llama),
            "--out",
            str(hidden),
            "--layers",
            "1,3,4",
            "--shard-tokens",
            "40",
            "--device",
            "cpu",
        ],
        capsys,
    )


@pytest.mark.parametrize(
    "fault, flags, why",
    [
        ("deleted", (), "the file is missing (its folder's manifest lists it)"),
        ("rotten", ("--verify",), "its blake2b checksum differs from its manifest's (the bytes changed)"),
    ],
)
def test_a_listed_part_deleted_or_rotten_is_named_and_hidden_is_untouched(
    prefect_api, tiny_llama, earlier_run, capsys, fault, flags, why
):
    seq, hidden = earlier_run
    before = snapshot(hidden)
    {"deleted": Path.unlink, "rotten": flip}[fault](seq / "part-00001.parquet")
    err = extract_cli(seq, hidden, tiny_llama, capsys, *flags)
    assert error_line(err) == f"error: damaged reconstruct shard part-00001.parquet: {why}"
    assert snapshot(hidden) == before


def test_a_concurrent_run_into_the_same_hidden_folder_refuses_and_changes_nothing(
    prefect_api, tiny_llama, earlier_run, capsys
):
    seq, hidden = earlier_run
    refused_while_held(hidden, lambda: extract_cli(seq, hidden, tiny_llama, capsys))
