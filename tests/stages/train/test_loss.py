"""The TTT loss reads the right positions, and its accuracies give the simulated acceptance length."""

import math

import torch

from eagle3_core.stages.train.loss import TargetHead, shift, simulated_acceptance_length, ttt_loss


def test_shift_reads_n_positions_ahead_and_pads_with_zeros():
    x = torch.tensor([[1, 2, 3, 4]])
    assert shift(x, 1).tolist() == [[2, 3, 4, 0]]
    assert shift(x, 6).tolist() == [[0, 0, 0, 0]]


def test_a_drafter_that_copies_the_target_scores_full_accuracy_at_every_step():
    """Step k at i must be judged against the target's distribution at i+1+k."""
    B, T, V, K = 2, 12, 5, 3
    target_logits = torch.randn(B, T, V) * 4
    probs = target_logits.softmax(-1)
    step_logits = [shift(target_logits, 1 + k) for k in range(K)]
    mask = torch.ones(B, T, dtype=torch.bool)
    loss, counts = ttt_loss(step_logits, probs, torch.ones(B, T, dtype=torch.bool), mask, decay=0.8)
    assert counts.accuracies() == [1.0, 1.0, 1.0]
    assert counts.count == [B * (T - 2), B * (T - 3), B * (T - 4)]  # i+2+k must exist
    entropy = -(probs * probs.log()).sum(-1)
    expected = sum(0.8**k * shift(entropy, 1 + k)[:, : T - 2 - k].mean() for k in range(K))
    assert math.isclose(float(loss), float(expected), rel_tol=1e-4)  # CE of p with itself = entropy


def test_positions_whose_token_is_unsupervised_or_outside_the_draft_vocab_do_not_count():
    B, T, V = 1, 8, 4
    probs = torch.full((B, T, V), 0.25)
    logits = [torch.zeros(B, T, V)]
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[0, 5] = True  # only token 5 is supervised -> position 3 counts
    _, counts = ttt_loss(logits, probs, torch.ones(B, T, dtype=torch.bool), mask, 0.8)
    assert counts.count == [1]
    in_draft = torch.ones(B, T, dtype=torch.bool)
    in_draft[0, 4] = False  # the target's top token at 4 is not draftable
    _, counts = ttt_loss(logits, probs, in_draft, mask, 0.8)
    assert counts.count == [0]


def test_target_head_renormalises_over_the_draft_vocab_and_maps_through_d2t():
    weight = torch.eye(6)  # logits = final
    d2t = torch.tensor([1, 1, 2])  # draft 0,1,2 -> target 1,2,4
    t2d = torch.tensor([0, 1, 1, 0, 1, 0], dtype=torch.bool)
    final = torch.tensor([[[0.0, 1.0, 2.0, 9.0, 3.0, 0.0]]])
    probs, in_draft = TargetHead(weight, d2t, t2d).labels(final)
    torch.testing.assert_close(probs[0, 0], torch.tensor([1.0, 2.0, 3.0]).softmax(-1))
    assert in_draft.tolist() == [[False]]  # the target's top token (3) is not draftable


def test_simulated_acceptance_length_chains_step_accuracies():
    assert simulated_acceptance_length([]) == 1.0
    assert math.isclose(simulated_acceptance_length([0.5, 0.5, 1.0]), 1 + 0.5 + 0.25 + 0.25)
