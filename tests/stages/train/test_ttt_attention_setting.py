"""train.ttt_attention: EAGLE-3's unroll through compiled flex on a GPU, the blocked form elsewhere.

The speed is measured on a GPU (benchmarks/train.md, "Long context on one GPU"); here: what the
setting changes (the drafter's attention, not the weights' key), and where it is refused."""

from types import SimpleNamespace

import pytest
import torch

from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import TrainConfig
from tests.stages.train.keys import train_key


def test_the_attention_decides_no_weights_so_switching_it_resumes_the_same_run():
    assert train_key(TrainConfig(ttt_attention="flex")) == train_key(TrainConfig())


def test_a_block_kind_with_eagle3s_attention_is_one_error_naming_the_field():
    with pytest.raises(ValueError, match=r"train\.ttt_attention: flex is EAGLE-3's unroll attention; dflash"):
        TrainConfig(kind="dflash", dflash={"mask_token_id": 1}, ttt_attention="flex")


def test_flex_is_refused_before_training_where_no_gpu_can_run_it():
    from eagle3_core.stages.train.kind_eagle3 import check

    cfg = TrainConfig(ttt_attention="flex")
    if torch.cuda.is_available():  # a GPU machine: flex runs there
        check(cfg, None)
        return
    with pytest.raises(ConfigError, match=r"train\.ttt_attention: flex trains only on a GPU") as refused:
        check(cfg, None)
    assert "blocked" in refused.value.fix
    check(TrainConfig(), None)  # the default trains anywhere
    check(TrainConfig(ttt_attention="flex", hostfile="hosts"), None)  # the GPUs are on the hostfile's nodes


def test_flex_is_what_the_trainers_drafter_attends_with(monkeypatch):
    import eagle3_core.drafter.attention_kernels as kernels
    import eagle3_core.stages.train.build as build_module
    from eagle3_core.stages.train.kind_eagle3 import build

    monkeypatch.setattr(build_module, "build_drafter", lambda *a, **k: SimpleNamespace(attend=None))
    assert build(None, TrainConfig()).attend is None  # the drafter's own: the blocked form
    attend = build(None, TrainConfig(ttt_attention="flex")).attend
    compiled = []  # eager kernels in place of the compiled ones (inductor cannot compile this mask on a CPU)
    monkeypatch.setattr(kernels, "_compiled_block_mask", kernels._block_mask)
    monkeypatch.setattr(kernels, "_compiled_flex", lambda: compiled.append("flex") or kernels._flex())
    q, segments = torch.randn(1, 2, 5, 4), torch.ones(1, 5, dtype=torch.long)
    assert attend(q, [q], [q], segments).shape == q.shape
    assert compiled == ["flex"]  # the compiled flex path, padded to its length
