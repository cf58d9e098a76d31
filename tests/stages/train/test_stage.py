"""`run_train` end to end with real DeepSpeed on CPU (gloo): metrics, checkpoints, export, resume."""

import json

import pytest
import torch

from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.metrics import read_metrics
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.drafter.test_model import expected_export_shapes

pytestmark = [pytest.mark.slow, pytest.mark.deepspeed]


@pytest.fixture(autouse=True)
def one_thread_trainer(monkeypatch):
    """The trainer is a tiny model on a shared 2-core box: one thread each avoids a 30x slowdown."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


class Recorder:
    def __init__(self, stop_at: int | None = None) -> None:
        self.steps, self.lines, self.stop_at = [], [], stop_at

    def progress(self, stage, done, total, **figures):
        self.steps.append(done)
        if self.stop_at is not None and done >= self.stop_at:
            raise KeyboardInterrupt("simulated kill")  # the launcher must kill the trainer

    def log(self, message):
        self.lines.append(message)


def config(**over) -> TrainConfig:
    base = dict(max_steps=6, micro_batch_tokens=256, lr=3e-3, warmup_steps=2, checkpoint_every=3, heldout_fraction=0.15)
    return TrainConfig(**{**base, **over})


def train(tiny_run, out, cfg, reporter=None):
    return run_train(
        cfg, TargetConfig(path=str(tiny_run.target)), tiny_run.hidden, tiny_run.vocab, out, reporter=reporter
    )


def test_a_run_writes_metrics_checkpoints_and_an_export_vllm_can_load(tiny_run, tmp_path):
    from safetensors.torch import load_file

    out, recorder = tmp_path / "drafter", Recorder()
    manifest = train(tiny_run, out, config(), recorder)
    assert manifest.status == "complete" and manifest.counts["steps"] == 6
    assert recorder.steps == [1, 2, 3, 4, 5, 6]
    assert manifest.details["sim_acceptance_length_initial"] >= 1.0
    rows = read_metrics(out / "metrics.jsonl")
    train_rows = [r for r in rows if r["split"] == "train"]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4, 5, 6]
    assert {"loss", "loss_k", "acc_k", "lr", "tokens_per_s", "sim_acceptance_length"} <= set(train_rows[0])
    assert len(train_rows[0]["acc_k"]) == 7
    assert [r["name"] for r in rows if r["split"] == "heldout"] == ["initial", "final"]
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-00000006"

    export = out / "export"
    hf = json.loads((export / "config.json").read_text())
    assert hf["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3] and hf["draft_vocab_size"] == 48
    assert hf["vocab_size"] == 96 and hf["target_hidden_size"] == 64
    from eagle3_core.drafter.model import DrafterConfig

    state = load_file(str(export / "model.safetensors"))
    assert {k: tuple(v.shape) for k, v in state.items()} == expected_export_shapes(DrafterConfig.from_hf(hf))
    vocab = load_file(str(tiny_run.vocab / "vocab.safetensors"))
    assert torch.equal(state["d2t"], vocab["d2t"]) and torch.equal(state["t2d"], vocab["t2d"])

    again = Recorder()
    assert train(tiny_run, out, config(), again).counts == manifest.counts
    assert again.steps == [] and any("skipped" in line for line in again.lines)

    changed = Recorder()  # another config never resumes these checkpoints
    retrained = train(tiny_run, out, config(lr=1e-3, max_steps=2), changed)
    assert any("checkpoints are discarded" in line for line in changed.lines)
    assert retrained.counts["steps"] == 2 and retrained.details["resumed_from"] is None
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl") if r["split"] == "train"] == [1, 2]


def test_a_killed_run_resumes_to_the_same_step_and_loss_as_an_uninterrupted_one(tiny_run, tmp_path):
    cfg = config(max_steps=8, checkpoint_every=3)
    whole = train(tiny_run, tmp_path / "whole", cfg)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_run, tmp_path / "killed", cfg, Recorder(stop_at=5))  # killed after the step-3 checkpoint
    assert json.loads((tmp_path / "killed" / "manifest.json").read_text())["status"] == "running"
    resumed = train(tiny_run, tmp_path / "killed", cfg)
    assert resumed.counts["steps"] == whole.counts["steps"] == 8
    assert resumed.details["resumed_from"] == 3
    rows = [r for r in read_metrics(tmp_path / "killed" / "metrics.jsonl") if r["split"] == "train"]
    assert [r["step"] for r in rows] == list(range(1, 9))  # no step twice, none missing
    reference = {
        r["step"]: r["loss"] for r in read_metrics(tmp_path / "whole" / "metrics.jsonl") if r["split"] == "train"
    }
    for r in rows:  # same batches, same weights
        assert r["loss"] == pytest.approx(reference[r["step"]], rel=1e-3)
    final = resumed.details["heldout_final"]["sim_acceptance_length"]
    assert final == pytest.approx(whole.details["heldout_final"]["sim_acceptance_length"], abs=0.01)


def test_a_trainer_failure_raises_the_trainers_own_error(tiny_run, tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"zero_optimization": {"stage": 2}, "fp16": {"loss_scale": "auto"}}))
    with pytest.raises(ConfigError, match='DeepSpeed config says "auto" where eagle3 has no value'):
        train(tiny_run, tmp_path / "drafter", config(deepspeed_config=str(ds)))
    manifest = json.loads((tmp_path / "drafter" / "manifest.json").read_text())
    assert manifest["status"] == "failed"


def test_online_mode_runs_the_target_inside_the_trainer_and_stores_no_states(tiny_run, tmp_path):
    out = tmp_path / "drafter"
    # a 4-layer target: its defaults (2, 2, 1) repeat a layer, which every entry point refuses
    manifest = run_train(
        config(mode="online", max_steps=2),
        TargetConfig(path=str(tiny_run.target), aux_layer_ids=[1, 2, 3]),
        None,
        tiny_run.vocab,
        out,
        sequences_dir=tiny_run.sequences,
    )
    assert manifest.status == "complete" and manifest.counts["steps"] == 2
    assert (out / "export" / "model.safetensors").exists()
    assert not list(out.rglob("shard-*.safetensors"))


def test_online_and_offline_batches_hold_the_same_states(tiny_run):
    from eagle3_core.stages.train.data import OfflineReader, OnlineReader

    offline, online = (
        OfflineReader(tiny_run.hidden),
        OnlineReader(tiny_run.sequences, str(tiny_run.target), [1, 2, 3], False),
    )
    a_samples, b_samples = offline.samples(), online.samples()
    a = offline.load(a_samples[:3], 256, torch.float32, "cpu")
    b = online.load(b_samples[:3], 256, torch.float32, "cpu")
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["loss_mask"], b["loss_mask"])
    torch.testing.assert_close(a["aux"], b["aux"], atol=0.05, rtol=0.02)  # offline is bf16
    torch.testing.assert_close(a["final"], b["final"], atol=0.05, rtol=0.02)


def test_a_run_killed_before_its_first_checkpoint_starts_over_with_one_metrics_history(tiny_run, tmp_path):
    out, cfg = tmp_path / "drafter", config(max_steps=2, checkpoint_every=5)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_run, out, cfg, Recorder(stop_at=1))  # killed before any checkpoint
    assert not (out / "checkpoints" / "latest").exists()
    train(tiny_run, out, cfg)
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["name"] for r in rows if r["split"] == "heldout"] == ["initial", "final"]
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2]
