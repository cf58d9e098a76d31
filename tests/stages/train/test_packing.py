"""Packing: several samples in one row give the loss and gradients they give padded, one a row."""

import torch

from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.data import OfflineReader, padding_share
from eagle3_core.stages.train.loop import forward_batch
from eagle3_core.stages.train.loss import TargetHead
from tests.stages.train.builders import HIDDEN, VOCAB


def test_a_packed_batch_gives_the_loss_and_gradients_of_the_same_samples_padded(tiny_run):
    torch.manual_seed(0)
    c = DrafterConfig(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        vocab_size=VOCAB,
        draft_vocab_size=VOCAB,
        target_hidden_size=HIDDEN,
    )
    drafter = Eagle3Drafter(c)
    head = TargetHead(torch.randn(VOCAB, HIDDEN), drafter.d2t, drafter.t2d)
    reader = OfflineReader(tiny_run.hidden)
    samples = sorted(reader.samples(), key=lambda s: s.length)[::8][:5]  # different lengths
    assert len({s.length for s in samples}) > 1
    cfg = TrainConfig(ttt_steps=3)
    results = []
    for pack in (False, True):
        batch = reader.load(samples, 4096, torch.float32, "cpu", pack=pack)
        loss, counts = forward_batch(drafter, head, batch, cfg)
        grads = torch.autograd.grad(loss, [p for p in drafter.parameters() if p.requires_grad])
        results.append((batch, loss, counts, grads))
    (padded, loss_a, counts_a, grads_a), (packed, loss_b, counts_b, grads_b) = results
    assert packed["input_ids"].shape == (1, sum(s.length for s in samples))
    assert padding_share(packed) == 0.0 < padding_share(padded)
    assert counts_a.count == counts_b.count and counts_a.count[0] > 0
    torch.testing.assert_close(loss_b, loss_a)
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)
