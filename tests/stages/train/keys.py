"""A train config's key, as the train stage builds it (``run.keys.stage_key``, its ``train`` part)."""

from eagle3_core.run.keys import stage_key
from eagle3_core.stages.train.stage import TrainStage


def train_key(cfg) -> str:
    """The stage key over ``cfg`` alone (the stage adds its source's facts and the layers beside it)."""
    return stage_key(TrainStage.name, TrainStage.key_version, train=cfg)
