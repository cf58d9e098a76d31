"""TTT attention in linear memory equals the dense definition: outputs, loss and every gradient."""

import pytest
import torch

import eagle3_core.drafter.model as model_module
from eagle3_core.drafter.attention import segment_positions, ttt_attention
from eagle3_core.drafter.model import Eagle3Drafter
from eagle3_core.stages.train.loss import ttt_loss
from tests.drafter.dense_reference import dense_ttt_attention
from tests.drafter.test_model import tiny_config


def segments_for(lengths: list[int], T: int) -> list[int]:
    """Samples 1, 2, ... of these lengths, then padding (segment 0) up to T."""
    row = [n + 1 for n, length in enumerate(lengths) for _ in range(length)]
    return row + [0] * (T - len(row))


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
@pytest.mark.parametrize("T,steps,block", [(1, 1, None), (7, 2, 3), (33, 4, 5), (64, 7, 16), (50, 3, 64)])
def test_blocked_attention_equals_the_dense_one_with_its_gradients(T, steps, block, dtype, tol):
    torch.manual_seed(T * 10 + steps)
    B, h, kv, d = 2, 4, 2, 8
    segments = torch.tensor([segments_for([T], T), segments_for([T // 3, T // 3], T)])  # packed + padded row
    q = torch.randn(B, h, T, d, dtype=dtype, requires_grad=True)
    ks = [torch.randn(B, kv, T, d, dtype=dtype, requires_grad=True) for _ in range(steps)]
    vs = [torch.randn(B, kv, T, d, dtype=dtype, requires_grad=True) for _ in range(steps)]
    fast, dense = ttt_attention(q, ks, vs, segments, block), dense_ttt_attention(q, ks, vs, segments)
    torch.testing.assert_close(fast, dense, atol=tol, rtol=tol)
    weight = torch.randn_like(dense)
    grads = torch.autograd.grad((fast * weight).sum(), [q, *ks, *vs])
    want = torch.autograd.grad((dense * weight).sum(), [q, *ks, *vs])
    for got, expected in zip(grads, want, strict=True):
        torch.testing.assert_close(got, expected, atol=tol, rtol=tol)


def test_a_key_of_another_sample_or_a_later_position_weighs_exactly_nothing():
    """The probabilities are floored at e^-80 before the exp (the CPU's exp is slow below -87),
    then zeroed where a key is hidden: a hidden key with an enormous value must not leak in."""
    B, h, T, d = 1, 2, 12, 4
    q, k = torch.zeros(B, h, T, d, requires_grad=True), torch.zeros(B, h, T, d)
    v = torch.zeros(B, h, T, d)
    v[:, :, 6:] = 1e30  # sample 2's values, and every later position of sample 1 is 0 as well
    segments = torch.tensor([segments_for([6, 6], T)])
    out = ttt_attention(q, [k], [v], segments, block=4)
    assert out[:, :, :6].abs().max() == 0  # sample 1 sees only its own zero values
    out[:, :, :6].sum().backward()
    assert torch.isfinite(q.grad).all()


def test_scores_far_below_the_rows_largest_still_equal_the_dense_softmax():
    """Scores spread over hundreds of units: the floor changes nothing a float can hold."""
    torch.manual_seed(3)
    B, h, T, d = 1, 2, 40, 8
    segments = torch.tensor([segments_for([T], T)])
    q = (torch.randn(B, h, T, d, dtype=torch.float64) * 30).requires_grad_()
    ks = [torch.randn(B, h, T, d, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    vs = [torch.randn(B, h, T, d, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    fast, dense = ttt_attention(q, ks, vs, segments, 8), dense_ttt_attention(q, ks, vs, segments)
    torch.testing.assert_close(fast, dense, atol=1e-10, rtol=1e-10)
    for got, want in zip(
        torch.autograd.grad(fast.sum(), [q, *ks, *vs]), torch.autograd.grad(dense.sum(), [q, *ks, *vs]), strict=True
    ):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def drafter_loss(drafter, ids, aux, probs, mask, segments, steps, dense=False):
    """The trainer's loss; ``dense``: the reference (T×T attention, every step's full logits)."""
    outputs = drafter.unroll(ids, aux, steps, segments)
    in_draft = torch.ones_like(mask)
    if dense:
        return ttt_loss([drafter.logits(h) for h in outputs], probs, in_draft, mask, 0.8, segments)[0]
    return ttt_loss(outputs, probs, in_draft, mask, 0.8, segments, drafter.logits)[0]


@pytest.mark.parametrize("T,steps", [(9, 1), (24, 3), (40, 7)])
@pytest.mark.parametrize("layout", ["one-per-row", "padded", "packed"])
def test_the_drafter_loss_and_every_weight_gradient_equal_the_dense_reference(T, steps, layout, monkeypatch):
    torch.manual_seed(T + steps)
    drafter = Eagle3Drafter(tiny_config())
    for p in drafter.parameters():
        torch.nn.init.normal_(p, std=0.3)
    rows = {"one-per-row": [[T], [T]], "padded": [[T], [T - 5]], "packed": [[T // 2, T - T // 2], [5, T - 9]]}[layout]
    segments = torch.tensor([segments_for(r, T) for r in rows])
    ids = torch.randint(0, 50, (2, T))
    aux = torch.randn(2, T, 3, 64)
    probs = torch.randn(2, T, 20).softmax(-1)
    mask = segments > 0
    monkeypatch.setattr("eagle3_core.drafter.attention.BLOCK_SCORES", 2 * 4 * 7 * T)  # 7-row blocks
    monkeypatch.setattr("eagle3_core.drafter.attention.MIN_BLOCK", 1)
    monkeypatch.setattr("eagle3_core.stages.train.loss.LOSS_CHUNK_ELEMENTS", 2 * 20 * 5)  # 5-position loss chunks
    loss = drafter_loss(drafter, ids, aux, probs, mask, segments, steps)
    grads = torch.autograd.grad(loss, [p for p in drafter.parameters() if p.requires_grad])
    monkeypatch.setattr(model_module, "ttt_attention", dense_ttt_attention)
    dense = drafter_loss(drafter, ids, aux, probs, mask, segments, steps, dense=True)
    want = torch.autograd.grad(dense, [p for p in drafter.parameters() if p.requires_grad])
    torch.testing.assert_close(loss, dense, atol=1e-5, rtol=1e-5)
    assert float(loss.detach()) > 0
    for got, expected in zip(grads, want, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_a_packed_row_gives_each_sample_the_logits_it_gets_alone():
    """No attention across samples, and positions restart at each sample (rope)."""
    torch.manual_seed(0)
    drafter = Eagle3Drafter(tiny_config()).double()
    for p in drafter.parameters():
        torch.nn.init.normal_(p, std=0.3)
    lengths, steps = [6, 11, 4], 3
    ids = torch.randint(0, 50, (1, sum(lengths)))
    aux = torch.randn(1, sum(lengths), 3, 64, dtype=torch.double)
    packed = [
        drafter.logits(h) for h in drafter.unroll(ids, aux, steps, torch.tensor([segments_for(lengths, sum(lengths))]))
    ]
    start = 0
    for length in lengths:
        alone = [
            drafter.logits(h)
            for h in drafter.unroll(ids[:, start : start + length], aux[:, start : start + length], steps)
        ]
        for k in range(steps):  # step k reads token i+1+k: the last k positions read past the sample
            keep = length - k
            torch.testing.assert_close(packed[k][:, start : start + keep], alone[k][:, :keep])
        start += length


def test_positions_restart_at_every_sample():
    segments = torch.tensor([[1, 1, 1, 2, 2, 0, 0]])
    assert segment_positions(segments).tolist() == [[0, 1, 2, 0, 1, 0, 1]]


def test_the_loss_never_labels_a_position_with_the_next_samples_tokens():
    probs, logits = torch.full((1, 8, 4), 0.25), [torch.zeros(1, 8, 4)]
    mask, in_draft = torch.ones(1, 8, dtype=torch.bool), torch.ones(1, 8, dtype=torch.bool)
    _, alone = ttt_loss(logits, probs, in_draft, mask, 0.8)
    _, packed = ttt_loss(logits, probs, in_draft, mask, 0.8, torch.tensor([[1, 1, 1, 1, 2, 2, 2, 2]]))
    assert (alone.count, packed.count) == ([6], [4])  # positions 2 and 3 would read sample 2


def largest_saved_tensor(drafter, T: int) -> int:
    sizes: list[int] = []

    def keep(t):
        sizes.append(t.numel())
        return t

    ids, aux = torch.randint(0, 50, (1, T)), torch.randn(1, T, 3, 64)
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        loss = sum(drafter.logits(h).sum() for h in drafter.unroll(ids, aux, steps=3))
    loss.backward()
    return max(sizes)


def test_autograd_keeps_no_tensor_that_grows_with_t_squared(monkeypatch):
    """What the unroll saves for backward is linear in T; the dense definition saves h·T² per step."""
    T = 2048
    drafter = Eagle3Drafter(tiny_config())
    assert largest_saved_tensor(drafter, T) <= T * 3 * 64  # the aux input is the largest
    monkeypatch.setattr(model_module, "ttt_attention", dense_ttt_attention)
    assert largest_saved_tensor(drafter, T) >= 4 * T * T


def test_recomputing_each_step_gives_the_same_loss_and_gradients_and_keeps_far_less(monkeypatch):
    torch.manual_seed(1)
    drafter = Eagle3Drafter(tiny_config()).double()
    for p in drafter.parameters():
        torch.nn.init.normal_(p, std=0.3)
    T = 64
    segments = torch.tensor([segments_for([30, 34], T)])
    ids, aux = torch.randint(0, 50, (1, T)), torch.randn(1, T, 3, 64, dtype=torch.double)
    probs, mask = torch.randn(1, T, 20, dtype=torch.double).softmax(-1), segments > 0
    results = []
    for recompute in (False, True):
        sizes: list[int] = []

        def keep(t, sizes=sizes):  # this iteration's list, bound at definition (ruff B023)
            sizes.append(t.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            outputs = drafter.unroll(ids, aux, 4, segments, recompute=recompute)
            loss = ttt_loss(outputs, probs, torch.ones_like(mask), mask, 0.8, segments, drafter.logits)[0]
        grads = torch.autograd.grad(loss, [p for p in drafter.parameters() if p.requires_grad])
        results.append((loss, grads, sum(sizes)))
    (loss_a, grads_a, kept_a), (loss_b, grads_b, kept_b) = results
    torch.testing.assert_close(loss_b, loss_a)
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(b, a)
    assert kept_b < kept_a / 3
