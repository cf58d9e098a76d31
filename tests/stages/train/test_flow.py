"""The train flow and `eagle3 train` on a real (temporary) Prefect API with real DeepSpeed on CPU."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.target.config import TargetConfig
from tests.prefect_reads import artifacts


@pytest.mark.slow
@pytest.mark.deepspeed
def test_flow_trains_and_publishes_the_loss_curve_and_heldout_table(prefect_api, tiny_run, tmp_path, monkeypatch):

    from flows.stages import stage_flow

    train_flow = stage_flow("train")

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = TrainConfig(max_steps=3, micro_batch_tokens=256, warmup_steps=1, heldout_fraction=0.15)
    manifest = train_flow(
        cfg=cfg,
        target=TargetConfig(path=str(tiny_run.target)),
        hidden_dir=str(tiny_run.hidden),
        vocab_dir=str(tiny_run.vocab),
        out_dir=str(tmp_path / "drafter"),
    )
    assert manifest.status == "complete" and manifest.counts["steps"] == 3
    assert (tmp_path / "drafter" / "loss_curve.png").stat().st_size > 1000
    keys = {a.key for a in artifacts("train-summary", "train-loss-curve", "train-heldout-acceptance", "train-progress")}
    assert {"train-summary", "train-loss-curve", "train-heldout-acceptance", "train-progress"} <= keys


@pytest.mark.slow  # the flow starts an ephemeral Prefect API (~15 s)
@pytest.mark.prefect_server
def test_cli_reports_a_bad_input_in_one_line_without_a_traceback(tiny_run, tmp_path):
    """The console script: exit 2 and the InputError's words (checked before any Prefect or DeepSpeed work)."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from flows.cli import main; main()",
            "train",
            "--input",
            str(tmp_path / "missing"),
            "--target",
            str(tiny_run.target),
            "--vocab",
            str(tiny_run.vocab),
            "--out",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "empty dataset: no index.parquet" in result.stderr and "Traceback" not in result.stderr


def test_cli_refuses_a_malformed_layer_list(tiny_run, tmp_path):
    from flows.cli import cli

    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--input",
            str(tiny_run.hidden),
            "--target",
            str(tiny_run.target),
            "--out",
            str(tmp_path / "d"),
            "--layers",
            "2,x,3",
        ],
    )
    assert result.exit_code == 2 and "expected three comma-separated layer ids" in result.output


@pytest.mark.slow
@pytest.mark.deepspeed
def test_the_flow_starts_the_engine_or_uses_an_endpoint_and_shows_which_in_its_artifacts(
    prefect_api, tiny_run, tmp_path, monkeypatch
):
    """online-vllm: the engine is started and stopped with the run, or is the recipe's endpoint."""
    import threading

    from eagle3_core.spool.folder import Spool
    from eagle3_core.spool.producer import serve
    from eagle3_core.stages.train.config import OnlineVllmConfig
    from eagle3_core.stages.train.online_engine import build_engine
    from flows.stages import stage_flow

    train_flow = stage_flow("train")
    from tests.stages.train.builders import LAYERS

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    target = TargetConfig(path=str(tiny_run.target), aux_layer_ids=LAYERS)
    engine = OnlineVllmConfig(engine="transformers", device="cpu")
    endpoint, stop = Spool(tmp_path / "endpoint"), threading.Event()
    endpoint.root.mkdir()
    standing = threading.Thread(
        target=serve,
        args=(
            endpoint,
            lambda: build_engine(engine, target, LAYERS, 4, 256, tmp_path / "engine"),
            stop,
            None,
            str(tiny_run.target),
            LAYERS,
        ),
        daemon=True,
    )
    standing.start()
    try:
        for name, online in (
            ("started", engine),
            ("endpoint", engine.model_copy(update={"endpoint": str(endpoint.root)})),
        ):
            cfg = TrainConfig(
                mode="online-vllm",
                max_steps=2,
                micro_batch_tokens=256,
                warmup_steps=1,
                heldout_fraction=0.15,
                online_vllm=online,
            )
            manifest = train_flow(
                cfg=cfg,
                target=target,
                hidden_dir=None,
                vocab_dir=str(tiny_run.vocab),
                out_dir=str(tmp_path / name),
                sequences_dir=str(tiny_run.sequences),
            )
            assert manifest.status == "complete" and manifest.details["online"]["engine_tokens"] > 0
    finally:
        stop.set()
        standing.join(timeout=60)
    shown = [a.description for a in artifacts("train-engine")]
    assert any("transformers engine started with the run" in d for d in shown)
    assert any(f"endpoint {endpoint.root}" in d for d in shown)
