"""`run_train` in mode online-vllm with real DeepSpeed on CPU: the engine beside the trainer, the
spool's figures in the manifest, per-step losses as offline, and a killed run's resume.

The engine here is the transformers engine on the tiny target; the toy through real vLLM is in
tests/stages/train/test_online_vllm_toy.py.
"""

import json

import pytest

from eagle3_core.stages.train.config import OnlineVllmConfig, TrainConfig
from eagle3_core.stages.train.metrics import read_metrics
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.stages.train.builders import LAYERS
from tests.stages.train.test_stage import Recorder

pytestmark = [pytest.mark.slow, pytest.mark.deepspeed]


@pytest.fixture(autouse=True)
def one_thread_trainer(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def config(mode: str, spool_gb: float = 1.0, **over) -> TrainConfig:
    base = dict(
        max_steps=8,
        micro_batch_tokens=256,
        lr=3e-3,
        warmup_steps=2,
        checkpoint_every=3,
        heldout_fraction=0.15,
        mode=mode,
        online_vllm=OnlineVllmConfig(engine="transformers", device="cpu", spool_gb=spool_gb),
    )
    return TrainConfig(**{**base, **over})


def train(tiny_run, out, cfg, reporter=None):
    hidden = tiny_run.hidden if cfg.mode == "offline" else None
    return run_train(
        cfg,
        TargetConfig(path=str(tiny_run.target), aux_layer_ids=LAYERS),
        hidden,
        tiny_run.vocab,
        out,
        sequences_dir=tiny_run.sequences,
        reporter=reporter,
    )


def tokens_read(tiny_run, first: int, end: int) -> int:
    """Tokens of the distinct samples of micro-batches first..end-1, plus the held-out set's."""
    from eagle3_core.stages.train.data import BatchPlan, split_heldout
    from eagle3_core.stages.train.online_vllm import SpoolReader

    samples = sorted(SpoolReader(tiny_run.sequences, tiny_run.sequences, "r", 1).samples(), key=lambda s: s.sample_id)
    train, heldout = split_heldout(samples, 0.15)
    plan = BatchPlan(train, 256, 0, pack=True)  # TrainConfig.packing defaults to true
    read = {s.sample_id: s.length for n in range(first, end) for s in plan.batch(n)}
    return sum(read.values()) + sum(s.length for s in heldout)


def losses(out) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(out / "metrics.jsonl") if r["split"] == "train"}


def test_online_training_gives_the_offline_losses_and_reports_its_engine_and_spool(tiny_run, tmp_path):
    offline = train(tiny_run, tmp_path / "offline", config("offline"))
    lines = Recorder()
    online = train(tiny_run, tmp_path / "online", config("online-vllm"), lines)
    assert online.status == "complete" and online.counts["steps"] == offline.counts["steps"] == 8
    want, got = losses(tmp_path / "offline"), losses(tmp_path / "online")
    assert sorted(got) == list(range(1, 9))
    for step, loss in got.items():  # same batches, same order; states equal within bf16
        assert loss == pytest.approx(want[step], rel=2e-2), step
    figures = online.details["online"]
    assert figures["reuse"] and figures["recomputed_tokens"] == 0  # 1 GiB holds the whole tiny set
    assert figures["engine_tokens"] == figures["unique_tokens"] > 0 and figures["engine_tokens_per_s"] > 0
    assert 0 < figures["spool_peak_bytes"] <= figures["budget_bytes"]
    assert 0 < figures["busy_share"] <= 1
    assert any("each sample is computed once" in line for line in lines.lines)
    assert not (tmp_path / "online" / "spool").exists()  # the run's spool goes with it


def test_a_killed_online_run_resumes_and_requests_only_the_batches_it_has_not_trained_on(tiny_run, tmp_path):
    tight = 0.0006  # 644 KiB: a few units, so epochs recompute
    whole = train(tiny_run, tmp_path / "whole", config("online-vllm", tight))
    assert not whole.details["online"]["reuse"] and whole.details["online"]["recomputed_tokens"] > 0
    with pytest.raises(KeyboardInterrupt):
        train(tiny_run, tmp_path / "killed", config("online-vllm", tight), Recorder(stop_at=5))
    requests = json.loads((tmp_path / "killed" / "spool" / "requests.json").read_text())
    resumed = train(tiny_run, tmp_path / "killed", config("online-vllm", tight))
    assert resumed.details["resumed_from"] == 3
    assert whole.details["online"]["units"] == len(requests["units"])  # the killed run asked what the whole one did
    assert resumed.details["online"]["unique_tokens"] == tokens_read(tiny_run, first=3, end=8)  # batches 4..8 only
    assert whole.details["online"]["unique_tokens"] == tokens_read(tiny_run, first=0, end=8)
    want, got = losses(tmp_path / "whole"), losses(tmp_path / "killed")
    assert sorted(got) == list(range(1, 9))
    for step, loss in got.items():
        assert loss == pytest.approx(want[step], rel=1e-3), step
