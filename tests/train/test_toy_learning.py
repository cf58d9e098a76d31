"""On the toy target, training on CPU lifts the held-out simulated acceptance length well above
an untrained drafter's: the one assertion that the drafter learns what the target would say."""

import pytest

from eagle3_core.target import TargetConfig
from eagle3_core.train.config import TrainConfig
from eagle3_core.train.stage import run_train
from tests.fixtures.toy import toy_recipe
from tests.train.toy_data import build_toy_inputs

pytestmark = [pytest.mark.slow, pytest.mark.deepspeed]

SAMPLES, DRAFT_VOCAB, STEPS = 160, 96, 60


def test_training_lifts_the_heldout_acceptance_length_well_above_an_untrained_drafter(
    toy_target, tmp_path, monkeypatch
):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # shared 2-core box: see tests/train/builders.py
    facts = toy_recipe()["target"]
    layers = facts["aux_layer_ids"]
    _, vocab, hidden = build_toy_inputs(toy_target, tmp_path, SAMPLES, DRAFT_VOCAB, layers, facts["end_of_turn_id"])
    cfg = TrainConfig(
        max_steps=STEPS, micro_batch_tokens=2048, lr=3e-3, warmup_steps=10, heldout_fraction=0.1, checkpoint_every=STEPS
    )
    manifest = run_train(
        cfg, TargetConfig(path=str(toy_target), aux_layer_ids=layers), hidden, vocab, tmp_path / "drafter"
    )
    before = manifest.details["sim_acceptance_length_initial"]
    after = manifest.details["sim_acceptance_length_final"]
    assert before < 1.3  # an untrained drafter almost never matches
    assert after > 2.0 and after > before + 1.0, (before, after, manifest.details["heldout_final"])
