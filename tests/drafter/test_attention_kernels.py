"""Every TTT attention implementation (blocked, flex, SDPA) equals the dense reference, with its
gradients, on packed and padded rows; and the drafter trains the same through each."""

import pytest
import torch

import eagle3_core.drafter.model as model_module
from eagle3_core.drafter.attention_kernels import IMPLEMENTATIONS, ttt_attention_for, ttt_mask
from tests.drafter.dense_reference import dense_ttt_attention
from tests.drafter.test_attention import drafter_loss, segments_for
from tests.drafter.test_variants import variant_drafter


def test_the_mask_is_causal_in_sample_for_step_0_and_the_diagonal_for_later_steps():
    segments = torch.tensor([[1, 1, 2, 2]])
    mask = ttt_mask(segments, 2)[0].int()
    assert mask[:, :4].tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]
    assert mask[:, 4:].tolist() == torch.eye(4, dtype=torch.int).tolist()


CUDA = torch.cuda.is_available()
# FlexAttention has no backward on CPU (torch 2.13: NotImplementedError); its gradients are checked
# where a GPU is: the same test, on a GPU machine.
NO_CPU_BACKWARD = pytest.mark.skipif(not CUDA, reason="needs a GPU: FlexAttention has no backward on CPU")
WITH_GRADIENTS = ["blocked", "sdpa", pytest.param("flex", marks=NO_CPU_BACKWARD)]
DEVICE = "cuda" if CUDA else "cpu"


def attention_inputs(T: int, steps: int, requires_grad: bool):
    torch.manual_seed(T * 10 + steps)
    B, h, kv, d = 2, 4, 2, 8
    segments = torch.tensor([segments_for([T], T), segments_for([T // 3, T // 3], T)], device=DEVICE)
    q = torch.randn(B, h, T, d, device=DEVICE, requires_grad=requires_grad)  # a packed and a padded row
    ks = [torch.randn(B, kv, T, d, device=DEVICE, requires_grad=requires_grad) for _ in range(steps)]
    vs = [torch.randn(B, kv, T, d, device=DEVICE, requires_grad=requires_grad) for _ in range(steps)]
    return q, ks, vs, segments


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@pytest.mark.parametrize("T,steps", [(1, 1), (7, 2), (33, 4), (64, 7), (200, 3)])
def test_each_implementation_equals_the_dense_one(name, T, steps):
    q, ks, vs, segments = attention_inputs(T, steps, requires_grad=False)
    fast, dense = ttt_attention_for(name)(q, ks, vs, segments), dense_ttt_attention(q, ks, vs, segments)
    torch.testing.assert_close(fast, dense, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("name", WITH_GRADIENTS)
@pytest.mark.parametrize("T,steps", [(1, 1), (7, 2), (33, 4), (64, 7)])
def test_each_implementations_gradients_equal_the_dense_ones(name, T, steps):
    q, ks, vs, segments = attention_inputs(T, steps, requires_grad=True)
    fast, dense = ttt_attention_for(name)(q, ks, vs, segments), dense_ttt_attention(q, ks, vs, segments)
    torch.testing.assert_close(fast, dense, atol=2e-5, rtol=2e-5)
    weight = torch.randn_like(dense)
    grads = torch.autograd.grad((fast * weight).sum(), [q, *ks, *vs])
    want = torch.autograd.grad((dense * weight).sum(), [q, *ks, *vs])
    for got, expected in zip(grads, want, strict=True):
        torch.testing.assert_close(got, expected, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("name", WITH_GRADIENTS)
def test_a_three_layer_eagle3_1_drafter_trains_the_same_through_each_implementation(name, monkeypatch):
    model = variant_drafter("eagle3.1_three_layers", torch.float32).to(DEVICE)
    T, steps = 20, 3
    segments = torch.tensor([segments_for([T // 2, T - T // 2], T), segments_for([5, T - 9], T)], device=DEVICE)
    ids, aux = torch.randint(0, 50, (2, T), device=DEVICE), torch.randn(2, T, 3, 64, device=DEVICE)
    probs, mask = torch.randn(2, T, 20, device=DEVICE).softmax(-1), segments > 0
    params = [p for p in model.parameters() if p.requires_grad]
    monkeypatch.setattr(model_module, "ttt_attention", ttt_attention_for(name))
    loss = drafter_loss(model, ids, aux, probs, mask, segments, steps)
    grads = torch.autograd.grad(loss, params)
    monkeypatch.setattr(model_module, "ttt_attention", dense_ttt_attention)
    dense = drafter_loss(model, ids, aux, probs, mask, segments, steps, dense=True)
    torch.testing.assert_close(loss, dense, atol=1e-5, rtol=1e-5)
    for got, expected in zip(grads, torch.autograd.grad(dense, params), strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_flex_lengths_are_powers_of_two_from_one_tile():
    from eagle3_core.drafter.attention_kernels import flex_length

    assert [flex_length(T) for T in (1, 128, 129, 3000, 16384, 16385)] == [128, 128, 256, 4096, 16384, 32768]


@pytest.mark.parametrize("T,steps", [(7, 2), (129, 3), (200, 7)])
def test_compiled_flex_runs_padded_to_its_length_and_still_equals_the_dense_one(T, steps, monkeypatch):
    """The call train.ttt_attention: flex makes, padding included, with flex's eager kernels standing in
    for the compiled ones (inductor cannot compile this mask on the CPU; on a GPU the same call compiles)."""
    import eagle3_core.drafter.attention_kernels as kernels

    lengths = []

    def block_mask(mask_mod, B, H, q_len, kv_len, device):
        lengths.append(q_len)
        return kernels._block_mask()(mask_mod, B, H, q_len, kv_len, device=device)

    monkeypatch.setattr(kernels, "_compiled_block_mask", lambda: block_mask)
    monkeypatch.setattr(kernels, "_compiled_flex", kernels._flex)
    q, ks, vs, segments = attention_inputs(T, steps, requires_grad=False)
    fast = ttt_attention_for("flex", compiled=True)(q, ks, vs, segments)
    assert lengths == [kernels.flex_length(T)] and fast.shape == q.shape
    torch.testing.assert_close(fast, dense_ttt_attention(q, ks, vs, segments), atol=2e-5, rtol=2e-5)


@NO_CPU_BACKWARD
@pytest.mark.parametrize("T,steps", [(200, 7), (1000, 3)])
def test_compiled_flex_padded_gives_the_dense_gradients_on_a_gpu(T, steps):
    """What train.ttt_attention: flex runs (compiled, padded to flex_length): outputs and gradients."""
    q, ks, vs, segments = attention_inputs(T, steps, requires_grad=True)
    fast = ttt_attention_for("flex", compiled=True)(q, ks, vs, segments)
    dense = dense_ttt_attention(q, ks, vs, segments)
    torch.testing.assert_close(fast, dense, atol=2e-5, rtol=2e-5)
    weight = torch.randn_like(dense)
    grads = torch.autograd.grad((fast * weight).sum(), [q, *ks, *vs])
    for got, expected in zip(grads, torch.autograd.grad((dense * weight).sum(), [q, *ks, *vs]), strict=True):
        torch.testing.assert_close(got, expected, atol=5e-5, rtol=5e-5)
