"""Drafter variants (EAGLE-3, EAGLE-3.1, norm_before_fc, deeper drafters): each one's forward equals
the engines' own (tests/drafter/engine_reference.py), its unroll equals incremental inference,
its blocked attention equals the dense one, and its export holds the keys both engines read."""

import json

import pytest
import torch

import eagle3_core.drafter.model as model_module
from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter, KVCache, sglang_aliases
from tests.drafter.dense_reference import dense_ttt_attention
from tests.drafter.engine_reference import combine_hidden_states, engine_forward
from tests.drafter.test_attention import drafter_loss, segments_for
from tests.drafter.test_model import tiny_config

VARIANTS = {
    "eagle3": {},
    "eagle3.1": {"fc_norm": True, "norm_output": True},
    "norm_before_fc": {"norm_before_fc": True},
    "two_layers": {"num_hidden_layers": 2},
    "eagle3.1_three_layers": {"fc_norm": True, "norm_output": True, "num_hidden_layers": 3},
}


def variant_drafter(name: str, dtype=torch.float64) -> Eagle3Drafter:
    torch.manual_seed(len(name))
    model = Eagle3Drafter(tiny_config(**VARIANTS[name])).to(dtype)
    for p in model.parameters():  # break the symmetric init of the norms
        torch.nn.init.normal_(p, std=0.3)
    return model


def engine_view(model: Eagle3Drafter) -> tuple[dict, dict]:
    """The tensors and config.json an engine reads, at the model's own precision (no bf16 cast)."""
    state = dict(model.state_dict())
    return {**state, **sglang_aliases(state)}, model.config.to_hf()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("name", VARIANTS)
def test_each_variant_computes_what_the_engines_compute(name, engine):
    model = variant_drafter(name)
    W, hf = engine_view(model)
    ids, aux = torch.randint(0, 50, (2, 9)), torch.randn(2, 9, 3 * 64, dtype=torch.float64) * 4
    pos = torch.arange(9).expand(2, 9)
    torch.testing.assert_close(model.combine(aux), combine_hidden_states(W, hf, aux))
    g = model.combine(aux)
    out = model(ids, g, pos)
    logits, fed_back = engine_forward(W, hf, ids, g, pos, engine)
    torch.testing.assert_close(out.logits, logits)
    torch.testing.assert_close(out.hidden, fed_back)
    assert not torch.allclose(
        out.hidden, engine_forward(W, {**hf, "norm_output": not hf["norm_output"]}, ids, g, pos)[1]
    )


@pytest.mark.parametrize("name", VARIANTS)
def test_each_variants_unroll_step_k_equals_incremental_inference(name):
    """Step k at position i sees what the k-th draft step would: every layer's context, then its own chain."""
    model = variant_drafter(name)
    T, K = 10, 4
    ids = torch.randint(0, 50, (1, T))
    aux = torch.randn(1, T, 3, 64, dtype=torch.double)
    unrolled = [model.logits(h) for h in model.unroll(ids, aux, steps=K)]
    for i in (0, 3, T - K - 1):
        cache = KVCache()
        out = model(ids[:, : i + 1], model.combine(aux[:, : i + 1]), torch.arange(i + 1)[None], cache=cache)
        torch.testing.assert_close(out.logits[:, i], unrolled[0][:, i])
        hidden = out.hidden[:, -1:]
        for k in range(1, K):
            out = model(ids[:, i + k : i + k + 1], hidden, torch.tensor([[i + k]]), cache=cache)
            torch.testing.assert_close(out.logits[:, 0], unrolled[k][:, i])
            hidden = out.hidden
    assert len(cache.k) == model.config.num_hidden_layers


@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("name", VARIANTS)
def test_each_variants_loss_and_gradients_equal_the_dense_reference(name, recompute, monkeypatch):
    model = variant_drafter(name, torch.float32)
    T, steps = 24, 3
    segments = torch.tensor([segments_for([T // 2, T - T // 2], T), segments_for([5, T - 9], T)])
    ids, aux = torch.randint(0, 50, (2, T)), torch.randn(2, T, 3, 64)
    probs, mask = torch.randn(2, T, 20).softmax(-1), segments > 0
    monkeypatch.setattr("eagle3_core.drafter.attention.BLOCK_SCORES", 2 * 4 * 7 * T)  # 7-row blocks
    monkeypatch.setattr("eagle3_core.drafter.attention.MIN_BLOCK", 1)
    params = [p for p in model.parameters() if p.requires_grad]
    unroll = model.unroll
    monkeypatch.setattr(model, "unroll", lambda *a: unroll(*a, recompute=recompute))
    loss = drafter_loss(model, ids, aux, probs, mask, segments, steps)
    grads = torch.autograd.grad(loss, params)
    monkeypatch.setattr(model_module, "ttt_attention", dense_ttt_attention)
    dense = drafter_loss(model, ids, aux, probs, mask, segments, steps, dense=True)
    want = torch.autograd.grad(dense, params)
    torch.testing.assert_close(loss, dense, atol=1e-5, rtol=1e-5)
    for got, expected in zip(grads, want, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
        assert got.abs().sum() > 0  # every weight of the variant is trained, its norms included


def variant_tensor_names(c: DrafterConfig) -> set[str]:
    layer = {
        "input_layernorm.weight",
        "hidden_norm.weight",  # layers >= 1: the input_layernorm again, SGLang's name for it
        "post_attention_layernorm.weight",
        *(f"self_attn.{x}_proj.weight" for x in "qkvo"),
        *(f"mlp.{x}_proj.weight" for x in ("gate", "up", "down")),
    }
    names = {"fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d", *(f"midlayer.{n}" for n in layer)}
    names |= {f"layers.{i}.{n}" for i in range(1, c.num_hidden_layers) for n in layer}
    names |= {f"fc_norm.{j}.weight" for j in range(3)} if c.fc_norm else set()
    return names | ({"input_norm.weight"} if c.norm_before_fc else set())


@pytest.mark.parametrize("name", VARIANTS)
def test_each_variant_exports_the_keys_and_tensors_vllm_and_sglang_read(name, tmp_path):
    from safetensors.torch import load_file

    model = variant_drafter(name, torch.float32)
    model.save_export(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    hf = json.loads((tmp_path / "config.json").read_text())
    c = model.config
    assert set(state) == variant_tensor_names(c)
    upper = [k for k in state if k.startswith("layers.") and k.endswith("hidden_norm.weight")]
    assert all(torch.equal(state[k], state[k.replace("hidden_norm", "input_layernorm")]) for k in upper)
    assert state["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * 64
    assert all(state[f"layers.{i}.self_attn.q_proj.weight"].shape[1] == 64 for i in range(1, c.num_hidden_layers))
    assert (hf["num_hidden_layers"], hf["fc_norm"], hf["norm_output"]) == (
        c.num_hidden_layers,
        c.fc_norm,
        c.norm_output,
    )
    assert hf["norm_before_fc"] == hf["eagle_config"]["norm_before_fc"] == c.norm_before_fc  # vLLM reads it there first
    loaded = Eagle3Drafter.from_export(tmp_path, embed_tokens=model.embed_tokens.weight)
    assert loaded.config == c
    ids, g, pos = torch.randint(0, 50, (1, 6)), torch.randn(1, 6, 64), torch.arange(6)[None]
    torch.testing.assert_close(loaded(ids, g, pos).logits, model(ids, g, pos).logits, atol=0.2, rtol=0.05)  # bf16


@pytest.mark.parametrize("name", VARIANTS)
def test_trainable_parameters_counts_each_variants_weights(name):
    model = variant_drafter(name)
    assert model.config.trainable_parameters() == sum(p.numel() for p in model.parameters() if p.requires_grad)
