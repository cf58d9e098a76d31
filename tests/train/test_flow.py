"""The train flow and `eagle3 train` on a real (temporary) Prefect API with real DeepSpeed on CPU."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from eagle3_core.target import TargetConfig
from eagle3_core.train.config import TrainConfig


@pytest.mark.slow
@pytest.mark.deepspeed
def test_flow_trains_and_publishes_the_loss_curve_and_heldout_table(prefect_api, tiny_run, tmp_path, monkeypatch):
    from prefect.client.orchestration import get_client

    from flows.train import train_flow

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = TrainConfig(max_steps=3, micro_batch_tokens=256, warmup_steps=1, heldout_fraction=0.15)
    manifest = train_flow(cfg=cfg, target=TargetConfig(path=str(tiny_run.target)), hidden_dir=str(tiny_run.hidden),
                          vocab_dir=str(tiny_run.vocab), out_dir=str(tmp_path / "drafter"))
    assert manifest.status == "complete" and manifest.counts["steps"] == 3
    assert (tmp_path / "drafter" / "loss_curve.png").stat().st_size > 1000
    with get_client(sync_client=True) as client:
        keys = {a.key for a in client.read_artifacts()}
    assert {"train-summary", "train-loss-curve", "train-heldout-acceptance", "train-progress"} <= keys


@pytest.mark.slow      # the flow starts an ephemeral Prefect API (~15 s)
@pytest.mark.prefect_server
def test_cli_reports_a_bad_input_in_one_line_without_a_traceback(tiny_run, tmp_path):
    """The console script: exit 2 and the InputError's words (checked before any Prefect or DeepSpeed work)."""
    result = subprocess.run([sys.executable, "-c", "from flows.cli import main; main()", "train",
                             "--input", str(tmp_path / "missing"), "--target", str(tiny_run.target),
                             "--vocab", str(tiny_run.vocab), "--out", str(tmp_path / "d")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "empty dataset: no index.parquet" in result.stderr and "Traceback" not in result.stderr


def test_cli_refuses_a_malformed_layer_list(tiny_run, tmp_path):
    from flows.cli import cli

    result = CliRunner().invoke(cli, ["train", "--input", str(tiny_run.hidden), "--target", str(tiny_run.target),
                                      "--out", str(tmp_path / "d"), "--layers", "2,x,3"])
    assert result.exit_code == 2 and "expected three integers" in result.output
