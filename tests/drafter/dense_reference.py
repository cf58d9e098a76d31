"""The dense TTT attention: the plain definition, kept only as the reference for the tests.

It holds the (B, h, T, T) step-0 scores, which is what eagle3_core/drafter/attention.py avoids.
"""

import math

import torch


def dense_ttt_attention(q, ks, vs, segments, block=None):
    """Softmax over [step-0 keys j <= i of the same sample; steps 1..k's keys at i]."""
    groups = q.shape[1] // ks[0].shape[1]
    ks = [k.repeat_interleave(groups, dim=1) for k in ks]
    vs = [v.repeat_interleave(groups, dim=1) for v in vs]
    scale = 1.0 / math.sqrt(q.shape[-1])
    T = q.shape[2]
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    allowed = causal & (segments[:, :, None] == segments[:, None, :])  # (B, T, T)
    s0 = (q @ ks[0].transpose(-1, -2) * scale).masked_fill(~allowed[:, None], float("-inf"))
    diag = [(q * k).sum(-1, keepdim=True) * scale for k in ks[1:]]  # (B, h, T, 1) each
    p = torch.cat([s0, *diag], dim=-1).softmax(-1)  # (B, h, T, T+k)
    y = p[..., :T] @ vs[0]  # (B, h, T, d)
    for j, v in enumerate(vs[1:]):
        y = y + p[..., T + j, None] * v
    return y
