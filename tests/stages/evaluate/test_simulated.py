"""The simulated acceptance length from the train stage's metrics.jsonl."""

import json

import pytest

from eagle3_core.stages.evaluate.simulated import simulated_acceptance


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 9, "acc_k": [0.9\n')
    return path


def test_the_last_held_out_record_wins_and_k_limits_the_chain(tmp_path):
    path = write(
        tmp_path / "metrics.jsonl",
        [
            {"step": 1, "split": "heldout", "acc_k": [0.1, 0.1]},
            {"step": 5, "split": "train", "acc_k": [0.9, 0.9, 0.9]},
            {"step": 5, "split": "heldout", "name": "final", "acc_k": [0.5, 0.8, 0.5]},
        ],
    )
    sim = simulated_acceptance(path, k=2)
    assert sim["split"] == "heldout" and sim["training_step"] == 5
    assert sim["acceptance_length"] == pytest.approx(1 + 0.5 + 0.5 * 0.8)


def test_training_records_serve_when_nothing_was_held_out(tmp_path):
    path = write(tmp_path / "metrics.jsonl", [{"step": 3, "split": "train", "acc_k": [1.0, 0.5]}])
    sim = simulated_acceptance(path, k=3)
    assert sim["split"] == "train" and sim["acceptance_length"] == pytest.approx(2.5)
    assert "exceeds the trained unroll" in sim["note"]


def test_no_metrics_file_means_no_figure(tmp_path):
    assert simulated_acceptance(tmp_path / "missing.jsonl", 3) is None
