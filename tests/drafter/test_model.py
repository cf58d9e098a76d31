"""The drafter model: training-time test equals inference, exports load as vLLM reads them."""

import json

import pytest
import torch

from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter, KVCache


def tiny_config(**over) -> DrafterConfig:
    base = dict(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=50,
        draft_vocab_size=20,
        target_hidden_size=64,
        aux_layer_ids=[1, 2, 3],
    )
    return DrafterConfig(**{**base, **over})


@pytest.fixture
def drafter() -> Eagle3Drafter:
    torch.manual_seed(0)
    model = Eagle3Drafter(tiny_config()).double()
    for p in model.parameters():  # break the symmetric init of the norms
        torch.nn.init.normal_(p, std=0.3)
    return model


def test_unroll_step_k_equals_incremental_inference_with_a_kv_cache(drafter):
    """Step k at position i sees what vLLM's k-th draft step would: the context, then its own chain."""
    T, K = 10, 4
    ids = torch.randint(0, 50, (1, T))
    aux = torch.randn(1, T, 3, 64, dtype=torch.double)
    unrolled = [drafter.logits(h) for h in drafter.unroll(ids, aux, steps=K)]
    for i in (0, 3, T - K - 1):
        cache = KVCache()
        g = drafter.combine(aux[:, : i + 1])
        out = drafter(ids[:, : i + 1], g, torch.arange(i + 1)[None], cache=cache)
        torch.testing.assert_close(out.logits[:, i], unrolled[0][:, i])
        hidden = out.hidden[:, -1:]
        for k in range(1, K):
            out = drafter(ids[:, i + k : i + k + 1], hidden, torch.tensor([[i + k]]), cache=cache)
            torch.testing.assert_close(out.logits[:, 0], unrolled[k][:, i])
            hidden = out.hidden


def test_full_recompute_equals_the_cached_path(drafter):
    ids = torch.randint(0, 50, (2, 7))
    g = torch.randn(2, 7, 64, dtype=torch.double)
    pos = torch.arange(7).expand(2, 7)
    full = drafter(ids, g, pos)
    cache = KVCache()
    first = drafter(ids[:, :4], g[:, :4], pos[:, :4], cache=cache)
    rest = drafter(ids[:, 4:], g[:, 4:], pos[:, 4:], cache=cache)
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], 1), full.logits)
    cache.crop(4)
    assert len(cache) == 4


def test_the_embedding_is_frozen_and_everything_else_trains(drafter):
    ids = torch.randint(0, 50, (1, 6))
    aux = torch.randn(1, 6, 3, 64, dtype=torch.double)
    sum(drafter.logits(h).sum() for h in drafter.unroll(ids, aux, steps=3)).backward()
    assert drafter.embed_tokens.weight.grad is None
    for name, p in drafter.named_parameters():
        if name != "embed_tokens.weight":
            assert p.grad is not None and p.grad.abs().sum() > 0, name


# vLLM's Eagle3LlamaForCausalLM.load_weights: `midlayer.` -> `layers.0.`, q/k/v stacked into qkv_proj
# (input 2H), gate/up into gate_up_proj, `d2t` -> draft_id_to_target_id, `t2d` skipped.
def expected_export_shapes(c: DrafterConfig) -> dict[str, tuple[int, ...]]:
    H, I, hd = c.hidden_size, c.intermediate_size, c.head_dim
    return {
        "fc.weight": (H, 3 * c.target_hidden_size),
        "midlayer.input_layernorm.weight": (H,),
        "midlayer.hidden_norm.weight": (H,),
        "midlayer.self_attn.q_proj.weight": (c.num_attention_heads * hd, 2 * H),
        "midlayer.self_attn.k_proj.weight": (c.num_key_value_heads * hd, 2 * H),
        "midlayer.self_attn.v_proj.weight": (c.num_key_value_heads * hd, 2 * H),
        "midlayer.self_attn.o_proj.weight": (H, c.num_attention_heads * hd),
        "midlayer.post_attention_layernorm.weight": (H,),
        "midlayer.mlp.gate_proj.weight": (I, H),
        "midlayer.mlp.up_proj.weight": (I, H),
        "midlayer.mlp.down_proj.weight": (H, I),
        "norm.weight": (H,),
        "lm_head.weight": (c.draft_vocab_size, H),
        "d2t": (c.draft_vocab_size,),
        "t2d": (c.vocab_size,),
    }


def test_export_holds_exactly_the_tensors_vllm_loads_with_their_shapes_and_dtypes(drafter, tmp_path):
    from safetensors.torch import load_file

    drafter.save_export(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    c = drafter.config
    assert {k: tuple(v.shape) for k, v in state.items()} == expected_export_shapes(c)
    assert state["d2t"].dtype == torch.int64 and state["t2d"].dtype == torch.bool
    assert all(v.dtype == torch.bfloat16 for k, v in state.items() if k not in ("d2t", "t2d"))
    hf = json.loads((tmp_path / "config.json").read_text())
    assert hf["architectures"] == ["LlamaForCausalLMEagle3"] and hf["model_type"] == "llama"
    assert (hf["num_hidden_layers"], hf["vocab_size"], hf["draft_vocab_size"]) == (1, 50, 20)
    assert hf["target_hidden_size"] == 64 and hf["torch_dtype"] == "bfloat16"
    assert hf["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert hf["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]  # SGLang adds 1


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_the_exports_weights_get_the_mode_of_every_other_file_the_export_writes(drafter, tmp_path, umask, mode):
    """safetensors writes 0600: the weights sat unreadable to another account beside a 0644 card and config.
    Under a stricter umask they follow it, as every file open() writes does."""
    import os
    import stat

    old = os.umask(umask)
    try:
        drafter.save_export(tmp_path)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] == mode, modes


def test_from_export_round_trips_the_weights_and_the_vocab_mapping(drafter, tmp_path):
    d2t = torch.arange(20) * 2 - torch.arange(20)  # draft d -> target 2d
    t2d = torch.zeros(50, dtype=torch.bool)
    t2d[torch.arange(20) * 2] = True
    drafter.set_vocab(d2t, t2d)
    drafter.save_export(tmp_path)
    loaded = Eagle3Drafter.from_export(tmp_path, embed_tokens=drafter.embed_tokens.weight.float())
    assert torch.equal(loaded.to_target_ids(torch.tensor([0, 3, 19])), torch.tensor([0, 6, 38]))
    assert torch.equal(loaded.t2d, t2d)
    ids = torch.randint(0, 50, (1, 5))
    g = torch.randn(1, 5, 64)
    pos = torch.arange(5)[None]
    want = drafter.float()(ids, g, pos).logits
    torch.testing.assert_close(loaded(ids, g, pos).logits, want, atol=0.15, rtol=0.05)  # bf16 export


def test_from_target_copies_widths_heads_and_rope_from_a_transformers_config():
    target = {
        "hidden_size": 128,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 300,
        "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
        "max_position_embeddings": 2048,
        "eos_token_id": 7,
    }
    c = DrafterConfig.from_target(target, draft_vocab_size=150, aux_layer_ids=[1, 2, 3])
    assert (c.head_dim, c.rope_theta, c.target_hidden_size, c.eos_token_id) == (32, 500000.0, 128, 7)
    assert DrafterConfig.from_hf(c.to_hf()) == c


def test_from_export_refuses_weights_that_are_not_an_eagle3_export(drafter, tmp_path):
    from safetensors.torch import save_file

    from eagle3_core.errors import InputError

    drafter.save_export(tmp_path)
    save_file({"fc.weight": torch.zeros(64, 192)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(InputError, match="not an EAGLE-3 export of this shape: missing"):
        Eagle3Drafter.from_export(tmp_path)
