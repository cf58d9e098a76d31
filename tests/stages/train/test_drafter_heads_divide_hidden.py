"""A drafter shape vLLM cannot load is refused when the drafter is built, before the first step, not by
evaluate's server after training.

The EAGLE-3 export is a Llama config, and transformers' ``LlamaConfig`` (vLLM's, loading the drafter)
refuses one whose heads do not divide its hidden size, whatever its ``head_dim``. configs/deepseek-r1.yaml's
drafter (56 heads x 128, for DeepSeek's hidden 7168) on a target of hidden 128 trained to the end, then
evaluate failed: "ServeError: vLLM exited with code 1 while starting", its log "The hidden size (128) is not
a multiple of the number of attention heads (56)" (found by tests/families/test_recipes_end_to_end.py).
"""

import pytest

from eagle3_core.errors import InputError
from eagle3_core.stages.train.build import build_drafter
from eagle3_core.stages.train.hidden_sources import check_inputs
from eagle3_core.target.config import TargetConfig


@pytest.fixture
def inputs(tiny_run):
    return check_inputs("offline", TargetConfig(path=str(tiny_run.target)), tiny_run.hidden, tiny_run.vocab)


def test_heads_that_do_not_divide_the_hidden_size_are_refused_naming_the_field(inputs):
    shape = {"num_attention_heads": 7, "num_key_value_heads": 7, "head_dim": 16}
    with pytest.raises(InputError, match=r"7 attention heads do not divide the target's hidden size") as refused:
        build_drafter(inputs, seed=0, shape=shape)
    assert "not a multiple of the number of attention heads (7)" in refused.value.message
    assert "train.drafter.num_attention_heads" in refused.value.fix


def test_what_is_refused_is_what_transformers_llama_config_refuses():
    from transformers import LlamaConfig

    with pytest.raises(Exception, match=r"not a multiple of the number of attention heads \(56\)"):
        LlamaConfig(hidden_size=128, num_attention_heads=56, num_key_value_heads=8, head_dim=128)
    LlamaConfig(hidden_size=7168, num_attention_heads=56, num_key_value_heads=8, head_dim=128)  # DeepSeek's
    LlamaConfig(hidden_size=7168, num_attention_heads=64, num_key_value_heads=8, head_dim=128)  # Kimi-K2.5's
