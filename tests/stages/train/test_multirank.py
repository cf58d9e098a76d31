"""Two trainer processes (the deepspeed launcher, gloo on CPU) train as one process does.

What multi-GPU and multi-node users rely on: the global batch of a step is the same micro-batches
whether 2 ranks read one each or 1 rank accumulates two, so the per-step losses agree; and a
2-rank run killed after a checkpoint resumes to the same losses. One 2-rank run checks both: killed
after its step-2 checkpoint and resumed, its four steps match one uninterrupted rank's (steps 1-2
before the kill, 3-4 after the resume). An uninterrupted 2-rank run beside it had cost one more
launch of the deepspeed launcher and two ranks, about 20 CPU-seconds, and checked nothing those
four steps do not.
"""

import pytest

from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.metrics import read_metrics
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.stages.train.test_stage import Recorder

pytestmark = [pytest.mark.slow, pytest.mark.deepspeed]


@pytest.fixture(autouse=True)
def one_thread_per_rank(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def config(**over) -> TrainConfig:
    base = dict(max_steps=4, micro_batch_tokens=256, lr=3e-3, warmup_steps=1, checkpoint_every=2, heldout_fraction=0.15)
    return TrainConfig(**{**base, **over})


def train(tiny_run, out, cfg, reporter=None):
    return run_train(
        cfg, TargetConfig(path=str(tiny_run.target)), tiny_run.hidden, tiny_run.vocab, out, reporter=reporter
    )


def train_rows(out) -> list[dict]:
    return [r for r in read_metrics(out / "metrics.jsonl") if r["split"] == "train"]


def losses(out) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(out / "metrics.jsonl") if r["split"] == "train"}


def test_two_ranks_and_one_rank_with_the_same_global_batch_give_the_same_losses_and_resume(tiny_run, tmp_path):
    one = train(tiny_run, tmp_path / "one", config(grad_accum=2))
    with pytest.raises(KeyboardInterrupt):
        train(tiny_run, tmp_path / "two", config(num_gpus=2), Recorder(stop_at=3))  # after the step-2 checkpoint
    killed = losses(tmp_path / "two")
    assert {1, 2} <= set(killed) and 4 not in killed  # killed mid-run, after the step-2 checkpoint
    two = train(tiny_run, tmp_path / "two", config(num_gpus=2))
    assert two.details["world_size"] == 2 and one.details["world_size"] == 1
    assert two.details["resumed_from"] == 2 and two.counts["steps"] == one.counts["steps"] == 4
    a, b = losses(tmp_path / "two"), losses(tmp_path / "one")
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]  # every step once: none lost or repeated by the resume
    for step in a:
        assert a[step] == pytest.approx(b[step], rel=1e-4), (step, a, b)
    assert len(set(a.values())) == 4  # the model moved: not one loss repeated
    # the step's accuracies and tokens count the whole global batch too, not rank 0's micro-batch alone
    for x, y in zip(train_rows(tmp_path / "two"), train_rows(tmp_path / "one"), strict=True):
        assert x["positions"] == y["positions"] and x["acc_k"] == pytest.approx(y["acc_k"], abs=1e-4), (x, y)
        assert x["tokens"] == y["tokens"], (x, y)
