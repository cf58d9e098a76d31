"""The stored states are the target's own, for exactly the layers named (vLLM counting)."""

import pytest
import torch

from eagle3_core.errors import ConfigError
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.extract.stage import run_extract
from eagle3_core.stages.extract.target_facts import resolve_layers
from eagle3_core.target.config import TargetConfig
from tests.stages.extract.helpers import read_hidden, write_sequences

BF16_TOL = dict(atol=2e-2, rtol=2e-2)


def _reference(model_dir, ids):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return model, out


def test_stored_states_equal_output_hidden_states_for_the_named_layers(tiny_llama, tmp_path):
    rows = write_sequences(tmp_path / "seq", [[23, 9, 40], [17]])
    manifest = run_extract(
        ExtractConfig(layers=[1, 3, 4], max_tokens_per_batch=64),
        TargetConfig(path=str(tiny_llama)),
        tmp_path / "seq",
        tmp_path / "hidden",
    )
    stored = read_hidden(tmp_path / "hidden")
    assert manifest.details["layers"] == [1, 3, 4]
    for row in rows:
        model, out = _reference(tiny_llama, row["input_ids"])
        got = stored[row["sample_id"]]
        for slot, k in enumerate([1, 3, 4]):
            want = out.hidden_states[k][0]
            torch.testing.assert_close(got["aux"][:, slot].float(), want, **BF16_TOL)
            # a one-off layer is a different state: the convention is pinned, not merely close
            assert not torch.allclose(got["aux"][:, slot].float(), out.hidden_states[k + 1][0], **BF16_TOL)
            assert not torch.allclose(got["aux"][:, slot].float(), out.hidden_states[k - 1][0], **BF16_TOL)
        assert got["input_ids"].tolist() == row["input_ids"]
        assert got["loss_mask"].tolist() == row["loss_mask"]


def test_final_state_through_lm_head_gives_the_targets_logits(tiny_llama, tmp_path):
    rows = write_sequences(tmp_path / "seq", [[31, 12]])
    run_extract(ExtractConfig(layers=[1, 3, 4]), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", tmp_path / "h")
    stored = read_hidden(tmp_path / "h")
    for row in rows:
        model, out = _reference(tiny_llama, row["input_ids"])
        with torch.no_grad():
            logits = model.lm_head(stored[row["sample_id"]]["final"].float())
        torch.testing.assert_close(logits, out.logits[0], atol=5e-2, rtol=5e-2)
        assert torch.equal(logits.argmax(-1), out.logits[0].argmax(-1))


def test_layers_default_to_2_mid_and_n_minus_3_unless_the_target_names_them():
    assert resolve_layers(None, TargetConfig(), 32) == [2, 16, 29]
    assert resolve_layers(None, TargetConfig(aux_layer_ids=[1, 2, 3]), 32) == [1, 2, 3]
    assert resolve_layers([4, 5, 6], TargetConfig(aux_layer_ids=[1, 2, 3]), 32) == [4, 5, 6]


def test_layers_outside_the_target_or_repeated_are_refused_with_a_fix():
    with pytest.raises(ConfigError, match="outside 0..5") as err:
        resolve_layers([2, 3, 6], TargetConfig(), 6)
    assert "--layers" in str(err.value)
    with pytest.raises(ConfigError, match="must differ"):
        resolve_layers(None, TargetConfig(), 4)  # (2, 2, 1)
