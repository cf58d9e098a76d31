"""train over a damaged hidden/ folder: refused in seconds, naming the shard (or the sample) and the fix."""

import json
import shutil

import pytest

from eagle3_core.errors import InputError
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import cli_error, error_line
from tests.faults import busy_line, flip, held, list_shards, snapshot, truncate


@pytest.fixture
def hidden(tiny_run, tmp_path):
    """A private copy of the session's hidden/, free to damage."""
    return shutil.copytree(tiny_run.hidden, tmp_path / "hidden")


def train_cli(tiny_run, hidden, out, capsys) -> str:
    return cli_error(
        [
            "train",
            "--input",
            str(hidden),
            "--target",
            str(tiny_run.target),
            "--vocab",
            str(tiny_run.vocab),
            "--out",
            str(out),
            "--max-steps",
            "2",
        ],
        capsys,
    )


def test_a_truncated_shard_is_refused_before_training_naming_it(prefect_api, tiny_run, hidden, tmp_path, capsys):
    shard = hidden / "shard-00001.safetensors"
    size = shard.stat().st_size
    truncate(shard)
    err = train_cli(tiny_run, hidden, tmp_path / "drafter", capsys)
    assert error_line(err) == (
        f"error: damaged extract shard shard-00001.safetensors: {size // 2} bytes, "
        f"its header says {size} (truncated or overwritten)"
    )
    assert "fix: delete it and rerun `eagle3 extract`: the stage redoes that shard" in err
    assert snapshot(tmp_path / "drafter") == {}  # no manifest, no trainer started


def test_a_deleted_shard_is_refused_before_training_naming_it(prefect_api, tiny_run, hidden, tmp_path, capsys):
    (hidden / "shard-00000.safetensors").unlink()
    err = train_cli(tiny_run, hidden, tmp_path / "drafter", capsys)
    assert error_line(err) == "error: damaged extract shard shard-00000.safetensors: the file is missing"
    assert snapshot(tmp_path / "drafter") == {}


def test_a_rotten_shard_of_the_right_size_is_refused_by_its_checksum_before_training(
    prefect_api, tiny_run, hidden, tmp_path, capsys
):
    list_shards(hidden, "extract", "shard-*.safetensors", "index.parquet")  # as extract's lifecycle leaves it
    flip(hidden / "shard-00001.safetensors")  # bytes in the tensors, header intact
    err = train_cli(tiny_run, hidden, tmp_path / "drafter", capsys)
    assert error_line(err) == (
        "error: damaged extract shard shard-00001.safetensors: its blake2b checksum differs "
        "from its manifest's (the bytes changed)"
    )
    assert "fix: delete it and rerun `eagle3 extract`: the stage redoes that shard" in err
    assert snapshot(tmp_path / "drafter") == {}


def test_a_concurrent_run_into_the_same_drafter_folder_refuses_and_changes_nothing(
    prefect_api, tiny_run, hidden, tmp_path, capsys
):
    out = tmp_path / "drafter"
    with held(out) as pid:
        err = train_cli(tiny_run, hidden, out, capsys)
    assert error_line(err) == busy_line(out, pid)
    assert snapshot(out) == {}


@pytest.mark.slow
@pytest.mark.deepspeed
def test_nan_states_stop_training_naming_the_sample_and_its_shard(tiny_run, hidden, tmp_path, monkeypatch):
    import pyarrow.parquet as pq
    from safetensors.torch import load_file, save_file

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    row = pq.read_table(hidden / "index.parquet").to_pylist()[3]
    tensors = load_file(str(hidden / row["shard"]))
    tensors["aux_hidden_states"][row["offset"] + 1, 0, 0] = float("nan")  # one value, bytes in place
    save_file(tensors, str(hidden / row["shard"]))
    cfg = TrainConfig(max_steps=40, micro_batch_tokens=256, heldout_fraction=0.15)
    with pytest.raises(InputError, match=f"NaN or Inf in the hidden states of sample {row['sample_id']}") as err:
        run_train(cfg, TargetConfig(path=str(tiny_run.target)), hidden, tiny_run.vocab, tmp_path / "drafter")
    assert err.value.sample_id == row["sample_id"] and err.value.path == str(hidden / row["shard"])
    assert "rerun `eagle3 extract`" in err.value.fix
    assert json.loads((tmp_path / "drafter" / "manifest.json").read_text())["status"] == "failed"
    assert not (tmp_path / "drafter" / "export").exists()
