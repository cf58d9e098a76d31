"""A held-out evaluation measures something or fails: with no supervised position it is an error,
never a loss of 0 (which the run summary would read as a perfect drafter)."""

import pytest
import torch

from eagle3_core.errors import InputError
from eagle3_core.stages.train.build import build_drafter, build_target_head
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.data import OfflineReader
from eagle3_core.stages.train.hidden_sources import check_inputs
from eagle3_core.stages.train.loop import Device, evaluate
from eagle3_core.target.config import TargetConfig


class MaskedOut(OfflineReader):
    """hidden/ as written, every position's loss_mask set to 0 (a held-out set with nothing supervised)."""

    def load(self, *args, **kwargs):
        batch = super().load(*args, **kwargs)
        return {**batch, "loss_mask": torch.zeros_like(batch["loss_mask"])}


@pytest.fixture
def parts(tiny_run):
    inputs = check_inputs("offline", TargetConfig(path=str(tiny_run.target)), tiny_run.hidden, tiny_run.vocab)
    drafter = build_drafter(inputs, seed=0)
    return inputs, drafter, build_target_head(inputs, drafter, "cpu"), Device(torch.device("cpu"), torch.float32, 0, 1)


def test_a_held_out_set_with_supervised_positions_is_measured(parts, tiny_run):
    inputs, drafter, head, dev = parts
    reader = OfflineReader(tiny_run.hidden)
    record = evaluate(drafter, head, reader, reader.samples()[:3], TrainConfig(), dev)
    assert record["positions"] > 0


def test_a_held_out_set_with_no_supervised_position_is_an_error_not_a_zero_loss(parts, tiny_run):
    inputs, drafter, head, dev = parts
    reader = MaskedOut(tiny_run.hidden)
    with pytest.raises(InputError, match=r"the held-out set \(3 samples\) has no supervised position"):
        evaluate(drafter, head, reader, reader.samples()[:3], TrainConfig(), dev)
