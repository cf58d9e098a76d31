"""A warm-up as long as the run is said in one line before training starts: the run would train
below its learning rate throughout, and the loss barely moves."""

from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.stage import warmup_warning


def test_a_warmup_not_shorter_than_the_run_is_one_warning_naming_both_fields():
    line = warmup_warning(TrainConfig(max_steps=4, warmup_steps=50))
    assert line is not None and "\n" not in line
    assert "train.warmup_steps (50)" in line and "train.max_steps (4)" in line


def test_a_shorter_warmup_or_a_run_by_epochs_says_nothing():
    assert warmup_warning(TrainConfig(max_steps=100, warmup_steps=50)) is None
    assert warmup_warning(TrainConfig(warmup_steps=50)) is None
