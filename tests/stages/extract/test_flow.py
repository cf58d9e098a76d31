"""The extract flow and `eagle3 extract` on a real (temporary) Prefect API."""

import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import cli_error
from tests.prefect_reads import artifacts, task_run_names
from tests.stages.extract.helpers import write_sequences


def test_flow_runs_one_task_per_shard_under_the_gpu_limit_and_publishes_artifacts(prefect_api, tiny_llama, tmp_path):
    from prefect.client.orchestration import get_client

    from flows.stages import stage_flow

    extract_flow = stage_flow("extract")
    from tasks.extract import gpu_limit_name

    write_sequences(tmp_path / "seq", [[30, 25, 40], [12]])
    cfg = ExtractConfig(layers=[1, 3, 4], shard_tokens=50)
    manifest = extract_flow(
        cfg=cfg,
        target=TargetConfig(path=str(tiny_llama)),
        sequences_dir=str(tmp_path / "seq"),
        out_dir=str(tmp_path / "hidden"),
    )
    assert manifest.status == "complete" and manifest.counts["shards"] == 4
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(gpu_limit_name()).limit == 1
    names = task_run_names("extract-shard-")
    assert {"extract-shard-00000", "extract-shard-00001", "extract-shard-00002"} <= names
    keys = {a.key for a in artifacts("extract-summary", "extract-shards", "extract-progress")}
    assert {"extract-summary", "extract-shards", "extract-progress"} <= keys


def test_cli_extracts_and_resumes(prefect_api, tiny_llama, tmp_path):
    from flows.cli import cli

    write_sequences(tmp_path / "seq", [[30, 25, 40]])
    args = [
        "extract",
        "--input",
        str(tmp_path / "seq"),
        "--target",
        str(tiny_llama),
        "--out",
        str(tmp_path / "h"),
        "--layers",
        "1,3,4",
        "--shard-tokens",
        "50",
    ]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "3 samples, 95 tokens, 3 shards (0 reused); layers [1, 3, 4], H=64" in result.output
    (tmp_path / "h" / "manifest.json").unlink()
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert "3 shards (3 reused)" in result.output
    assert pq.read_table(tmp_path / "h" / "index.parquet").num_rows == 3
    assert json.loads((tmp_path / "h" / "manifest.json").read_text())["details"]["layers"] == [1, 3, 4]


def test_cli_refuses_a_malformed_layer_list(tiny_llama, tmp_path):
    from flows.cli import cli

    (tmp_path / "part-00000.parquet").touch()  # a sequences folder, so the layers are looked at
    result = CliRunner().invoke(cli, two_layers_argv(tmp_path, tiny_llama, tmp_path / "h"))
    assert result.exit_code == 2 and "must name 3 layers (low, mid, high)" in result.output


def two_layers_argv(input_dir: Path, target: Path, out: Path) -> list[str]:
    """`eagle3 extract` with two layers where three are wanted."""
    return ["extract", "--input", str(input_dir), "--target", str(target), "--out", str(out), "--layers", "2,16"]


def test_cli_checks_the_input_folder_before_the_layers(tiny_llama, tmp_path, capsys):
    err = cli_error(two_layers_argv(tmp_path / "nowhere", tiny_llama, tmp_path / "h"), capsys)
    assert err.startswith("error: no sequences found") and "eagle3 reconstruct" in err
