"""The export read the way vLLM and SGLang read it: each engine captures exactly the trained layers.

The two readers below restate the engines' own code (vLLM 0.32 and SGLang, as of 2026):

- vLLM, ``eagle3_utils.get_eagle3_aux_layers_from_config``: the draft ``hf_config``'s top-level
  ``eagle_aux_hidden_state_layer_ids`` as a tuple; ``LlamaModel.forward`` then appends
  ``hidden_states + residual`` *before* running layer ``idx`` for each id: transformers'
  ``output_hidden_states[idx]``.
- SGLang, ``ModelRunner``: ``draft hf_config.eagle_config["eagle_aux_hidden_state_layer_ids"]``,
  passed to ``LlamaForCausalLM.set_eagle3_layers_to_capture``, which stores ``[val + 1 for val in
  layer_ids]`` as ``layers_to_capture``; ``LlamaModel.forward`` appends ``hidden_states +
  residual`` before layer ``i`` for ``i in layers_to_capture``: ``output_hidden_states[i]``.
- vLLM's ``Eagle3LlamaForCausalLM.load_weights``: ``d2t`` becomes ``draft_id_to_target_id``,
  ``t2d`` is skipped, a missing ``d2t`` or ``embed_tokens`` is skipped (the embedding is then
  the target's).
"""

import json

import pytest
import torch

from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter
from tests.drafter.test_model import tiny_config


def vllm_captured_hidden_states(config: dict) -> list[int]:
    ids = config.get("eagle_aux_hidden_state_layer_ids")
    return sorted(tuple(ids))  # captured in layer order, whatever the list order


def sglang_captured_hidden_states(config: dict) -> list[int]:
    layers_to_capture = [val + 1 for val in config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]]
    return sorted(layers_to_capture)


@pytest.mark.parametrize("trained", [[1, 2, 3], [2, 16, 29], [1, 30, 58]])
def test_each_engine_captures_the_layers_the_drafter_was_trained_on(trained, tmp_path):
    model = Eagle3Drafter(tiny_config(aux_layer_ids=trained))
    model.save_export(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert vllm_captured_hidden_states(config) == trained
    assert sglang_captured_hidden_states(config) == trained
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [k - 1 for k in trained]
    assert DrafterConfig.from_hf(config).aux_layer_ids == trained


def test_an_sglang_style_export_reads_back_in_vllm_numbering():
    hf = {**tiny_config().to_hf(), "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}
    del hf["eagle_aux_hidden_state_layer_ids"]
    assert DrafterConfig.from_hf(hf).aux_layer_ids == [2, 16, 29]


def vllm_loaded_names(state: dict) -> set[str]:
    """Parameter names vLLM's load_weights fills from the checkpoint."""
    names = set()
    for name in state:
        if "t2d" in name:
            continue
        names.add(
            name.replace("d2t", "draft_id_to_target_id")
            if "d2t" in name
            else name
            if "lm_head" in name
            else "model." + name
        )
    return names


def test_a_full_draft_vocab_ships_no_d2t_and_keeps_every_target_logit_in_place(tmp_path):
    from safetensors.torch import load_file

    torch.manual_seed(0)
    model = Eagle3Drafter(tiny_config(draft_vocab_size=50)).double()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    order = torch.randperm(50)  # a frequency-ordered full vocab
    model.set_vocab(order - torch.arange(50), torch.ones(50, dtype=torch.bool))
    model.save_export(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    assert "d2t" not in state and "t2d" not in state
    assert "draft_id_to_target_id" not in vllm_loaded_names(state)
    loaded = Eagle3Drafter.from_export(tmp_path, embed_tokens=model.embed_tokens.weight.float())
    ids, g, pos = torch.randint(0, 50, (1, 5)), torch.randn(1, 5, 64), torch.arange(5)[None]
    want = torch.full((1, 5, 50), 0.0)
    want[..., order] = model.float()(ids, g, pos).logits  # draft id d scores target id order[d]
    torch.testing.assert_close(loaded(ids, g, pos).logits, want, atol=0.15, rtol=0.05)


def test_a_reduced_draft_vocab_ships_d2t_and_the_embedding_only_on_request(tmp_path):
    from safetensors.torch import load_file

    model = Eagle3Drafter(tiny_config())
    model.save_export(tmp_path / "plain")
    model.save_export(tmp_path / "pp", with_embedding=True)
    plain, pp = (
        load_file(str(tmp_path / "plain" / "model.safetensors")),
        load_file(str(tmp_path / "pp" / "model.safetensors")),
    )
    assert "model.draft_id_to_target_id" not in vllm_loaded_names(
        plain
    ) and "draft_id_to_target_id" in vllm_loaded_names(plain)
    assert "model.embed_tokens.weight" not in vllm_loaded_names(plain)
    assert "model.embed_tokens.weight" in vllm_loaded_names(pp) and pp["embed_tokens.weight"].shape == (50, 64)
    loaded = Eagle3Drafter.from_export(tmp_path / "pp")  # no target needed: it ships its own
    torch.testing.assert_close(loaded.embed_tokens.weight, model.embed_tokens.weight.bfloat16().float())
