"""Training-time-test attention in memory linear in T: no T×T tensor is ever kept.

Step k of the unroll (``ttt_attention``) lets the query at position i attend to

- step 0's keys at every j <= i of the same sample (causal, blocked at sample boundaries), and
- the keys of steps 1..k at i itself (the diagonal: what the k-th draft step sees at inference).

The step-0 part is computed per block of queries (``causal_attention_lse``): each block builds its
(B, h, block, keys) scores, returns its output and log-sum-exp, and frees the scores. Its backward
is FlashAttention's (``BlockAttention``): it rebuilds one block's probabilities from q, k and the
log-sum-exp, so what autograd keeps is q, k, v and the log-sum-exp (B, h, T), never a score. The diagonal terms are merged
through the log-sum-exp (``merge_diagonal``): exactly the softmax over [step-0 scores; diagonal
scores], without ever holding the former. Pure PyTorch, the same on CPU and CUDA; exact (the
tests compare loss and gradients with a dense reference at fp32 tolerance).

Why not a fused kernel: ``scaled_dot_product_attention`` returns no log-sum-exp (needed to merge
the diagonal steps exactly, with its gradient), and flex attention's ``return_lse`` runs
memory-efficiently only compiled (on CPU that needs a C++ toolchain and minutes of compiling
per shape; its eager fallback builds the full score matrix). The blocked form is exact and
linear everywhere; a GPU build could swap in a fused kernel behind ``causal_attention_lse``.

Sample boundaries (packing): ``segments`` (B, T) gives each position its sample number; a query
attends only to keys of its own sample. Samples are contiguous, so a block of queries needs only
the keys from the start of its first query's sample: packed short samples cost Σ len², not T².

Memory: the scores of one block are capped at ``BLOCK_SCORES`` elements (fp32: 4 bytes each, a
few copies live during backward), so the block shrinks as T × heads grows (never below 16 rows).
"""

from __future__ import annotations

import math

import torch

# 2^25 scores (128 MiB in fp32) per block: at T = 32K and 32 heads a block is 32 queries; small
# enough that backward's few copies of it stay under 1 GiB, large enough for a GPU matmul.
BLOCK_SCORES = 1 << 25
MIN_BLOCK = 16
# Never more than 256 queries a block: on the CPU at T = 2K, one 2,048-row block ran 3x slower
# forward than 256-row ones (the scores fall out of cache); the GPU gains nothing above it.
MAX_BLOCK = 256
EXP_FLOOR = -80.0


def segment_starts(segments: torch.Tensor) -> torch.Tensor:
    """(B, T) index of the first position of each position's sample (samples are contiguous)."""
    T = segments.shape[1]
    idx = torch.arange(T, device=segments.device).expand_as(segments)
    first = torch.ones_like(segments, dtype=torch.bool)
    first[:, 1:] = segments[:, 1:] != segments[:, :-1]
    return torch.where(first, idx, torch.zeros_like(idx)).cummax(dim=1).values


def segment_positions(segments: torch.Tensor) -> torch.Tensor:
    """(B, T) position of each token inside its own sample: rope restarts at every sample."""
    T = segments.shape[1]
    return torch.arange(T, device=segments.device).expand_as(segments) - segment_starts(segments)


def by_kv_head(x: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """(B, h, T, ...) -> (B, h_kv, g, T, ...): the g query heads that share one KV head, together."""
    return x.view(x.shape[0], kv_heads, x.shape[1] // kv_heads, *x.shape[2:])


def acc_dtype(x: torch.Tensor) -> torch.dtype:
    """Softmax in fp32 at least (bf16 inputs), in fp64 for fp64 inputs (the tests)."""
    return torch.promote_types(x.dtype, torch.float32)


def _scores(q, k, seg_q, seg_k, first_query: int, first_key: int, scale: float):
    """(B, kv, g, bq, S) scores of queries [first_query, +bq) against keys [first_key, +S), in
    acc_dtype, -inf where the key is later or in another sample; and where it is not, (B, 1, 1, bq, S)."""
    bq, acc = q.shape[2], acc_dtype(q)
    qpos = torch.arange(bq, device=q.device)[:, None] + first_query
    kpos = torch.arange(k.shape[2], device=q.device)[None, :] + first_key
    hidden = ((kpos > qpos) | (seg_q[:, :, None] != seg_k[:, None, :]))[:, None, None]
    s = (by_kv_head(q, k.shape[1]) @ k[:, :, None].transpose(-1, -2)).to(acc).mul_(scale)
    return s.masked_fill_(hidden, float("-inf")), hidden


def _probabilities(shifted: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """exp(shifted), exactly 0 where hidden, in place. The floor: below about -87 fp32's exp
    underflows and the CPU's vectorized exp takes a slow path, -inf included (100x slower per
    element here, half a training step's time); e^-80 is nothing beside the row's largest, e^0."""
    return shifted.clamp_min_(EXP_FLOOR).exp_().masked_fill_(hidden, 0.0)


class BlockAttention(torch.autograd.Function):
    """One block of queries: (out (B, h, bq, d), lse (B, h, bq)) in acc_dtype, with FlashAttention's
    backward: it saves q, k, v and lse, never the (bq, S) probabilities, and rebuilds them with one
    exp. A query always sees itself (its own key is in the block's span, same sample), so no row is
    all -inf. Autograd through a checkpointed block took the scores' exp five times a step: with
    ``_probabilities``, a 2K-token step runs twice as fast here (benchmarks/train.md, TTT memory)."""

    @staticmethod
    def forward(ctx, q, k, v, seg_q, seg_k, first_query: int, first_key: int, scale: float):
        B, h, bq, d = q.shape
        s, hidden = _scores(q, k, seg_q, seg_k, first_query, first_key, scale)
        top = s.amax(-1, keepdim=True)
        p = _probabilities(s.sub_(top), hidden)
        total = p.sum(-1, keepdim=True)
        out = p.div_(total) @ v[:, :, None].to(p.dtype)  # (B, kv, g, bq, d)
        lse = (top + total.log()).squeeze(-1)  # (B, kv, g, bq)
        ctx.save_for_backward(q, k, v, seg_q, seg_k, lse)
        ctx.where = (first_query, first_key, scale)
        return out.reshape(B, h, bq, d), lse.reshape(B, h, bq)

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, seg_q, seg_k, lse = ctx.saved_tensors
        first_query, first_key, scale = ctx.where
        kv = k.shape[1]
        s, hidden = _scores(q, k, seg_q, seg_k, first_query, first_key, scale)
        p = _probabilities(s.sub_(lse[..., None]), hidden)
        d_out = by_kv_head(d_out.to(p.dtype), kv)  # (B, kv, g, bq, d)
        d_v = (p.transpose(-1, -2) @ d_out).sum(2)  # (B, kv, S, d)
        d_p = d_out @ v[:, :, None].transpose(-1, -2).to(p.dtype)  # (B, kv, g, bq, S)
        # d s_j = p_j (d_out . v_j - d_out . out + d_lse), and d_out . out = sum_j p_j d_p_j
        # (an output nothing used gets zeros: autograd materializes them)
        shift = (p * d_p).sum(-1, keepdim=True) - by_kv_head(d_lse.to(p.dtype), kv)[..., None]
        d_s = d_p.sub_(shift).mul_(p).mul_(scale)
        d_q = (d_s @ k[:, :, None].to(p.dtype)).reshape(q.shape)
        d_k = (d_s.transpose(-1, -2) @ by_kv_head(q, kv).to(p.dtype)).sum(2)
        return d_q.to(q.dtype), d_k.to(k.dtype), d_v.to(v.dtype), None, None, None, None, None


def block_rows(heads_x_batch: int, keys: int) -> int:
    return min(MAX_BLOCK, max(MIN_BLOCK, BLOCK_SCORES // max(1, heads_x_batch * keys)))


def causal_attention_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, segments: torch.Tensor, block: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention within samples, and its log-sum-exp: (B, h, T, d), (B, h, T), in fp32 (fp64 for fp64).

    q (B, h, T, d), k/v (B, h_kv, T, d), segments (B, T). ``block`` forces the query block size
    (tests use small ones to cross many block edges).
    """
    B, h, T, d = q.shape
    block = block or block_rows(B * h, T)
    scale = 1.0 / math.sqrt(d)
    firsts = segment_starts(segments)[:, ::block].min(dim=0).values.tolist()  # first key per block
    outs, lses = [], []
    for n, lo in enumerate(firsts):
        s, e = n * block, min(T, (n + 1) * block)
        args = (q[:, :, s:e], k[:, :, lo:e], v[:, :, lo:e], segments[:, s:e], segments[:, lo:e], s, lo, scale)
        out, lse = BlockAttention.apply(*args)
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def merge_diagonal(
    out0: torch.Tensor, lse0: torch.Tensor, q: torch.Tensor, ks: list[torch.Tensor], vs: list[torch.Tensor]
) -> torch.Tensor:
    """Softmax over [step-0 keys; the diagonal keys ks[j] at i], from step 0's output and lse.

    out = e^(lse0 - L) out0 + Σ_j e^(s_j - L) v_j  with  L = logsumexp(lse0, s_1, ..., s_k).
    """
    B, h, T, d = q.shape
    if not ks:
        return out0.to(q.dtype)
    kv, acc = ks[0].shape[1], acc_dtype(q)
    qg = by_kv_head(q, kv).to(acc)  # (B, kv, g, T, d)
    diag = [(qg * k[:, :, None].to(acc)).sum(-1) / math.sqrt(d) for k in ks]  # (B, kv, g, T) each
    lse0 = by_kv_head(lse0, kv)
    total = torch.logsumexp(torch.stack([lse0, *diag]), dim=0)  # (B, kv, g, T)
    y = torch.exp(lse0 - total)[..., None] * by_kv_head(out0, kv)  # (B, kv, g, T, d)
    for score, v in zip(diag, vs):
        y = y + torch.exp(score - total)[..., None] * v[:, :, None].to(acc)
    return y.reshape(B, h, T, d).to(q.dtype)


def ttt_attention(
    q: torch.Tensor, ks: list[torch.Tensor], vs: list[torch.Tensor], segments: torch.Tensor, block: int | None = None
) -> torch.Tensor:
    """Step len(ks)-1 of the unroll: q (B, h, T, d); ks/vs one (B, h_kv, T, d) per step so far."""
    out0, lse0 = causal_attention_lse(q, ks[0], vs[0], segments, block)
    return merge_diagonal(out0, lse0, q, ks[1:], vs[1:])
