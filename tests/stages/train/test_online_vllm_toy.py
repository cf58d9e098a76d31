"""The toy target through real vLLM: online-vllm training gives the offline per-step losses.

Offline reads hidden/ written by the extract stage (transformers engine); online gets the same
batches' states from the vLLM engine through the spool. The states agree within bf16 rounding,
so the losses do too. One vLLM start, under the machine-wide vLLM lock.
"""

import pytest

from eagle3_core.stages.train.config import OnlineVllmConfig, TrainConfig
from eagle3_core.stages.train.metrics import read_metrics
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.fixtures.toy import toy_recipe
from tests.fixtures.vllm import machine_vllm_lock
from tests.stages.train.toy_data import build_toy_inputs

SAMPLES, DRAFT_VOCAB, STEPS = 48, 64, 6


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.deepspeed
@pytest.mark.timeout(2400)  # may wait for another session's vLLM
def test_online_vllm_and_offline_training_give_the_same_per_step_losses(toy_target, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    facts = toy_recipe()["target"]
    layers = facts["aux_layer_ids"]
    sequences, vocab, hidden = build_toy_inputs(
        toy_target, tmp_path, SAMPLES, DRAFT_VOCAB, layers, facts["end_of_turn_id"]
    )
    target = TargetConfig(path=str(toy_target), aux_layer_ids=layers)
    base = dict(
        max_steps=STEPS,
        micro_batch_tokens=1024,
        lr=3e-3,
        warmup_steps=2,
        heldout_fraction=0.1,
        checkpoint_every=STEPS,
        ttt_steps=3,
    )
    offline = run_train(TrainConfig(**base), target, hidden, vocab, tmp_path / "offline")
    online_cfg = TrainConfig(
        **base,
        mode="online-vllm",
        online_vllm=OnlineVllmConfig(engine="vllm", vllm_kv_cache_bytes=64 << 20, spool_gb=0.05),
    )
    with machine_vllm_lock():
        online = run_train(online_cfg, target, None, vocab, tmp_path / "online", sequences_dir=sequences)
    want = {r["step"]: r["loss"] for r in read_metrics(tmp_path / "offline" / "metrics.jsonl") if r["split"] == "train"}
    got = {r["step"]: r["loss"] for r in read_metrics(tmp_path / "online" / "metrics.jsonl") if r["split"] == "train"}
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    for step in want:
        assert got[step] == pytest.approx(want[step], rel=2e-2), (step, got[step], want[step])
    figures = online.details["online"]
    assert figures["engine"] == "vllm" and figures["engine_tokens_per_s"] > 0 and figures["engine_startup_s"] > 0
    assert online.details["sim_acceptance_length_final"] == pytest.approx(
        offline.details["sim_acceptance_length_final"], abs=0.05
    )
