"""The training-time-test attention through PyTorch's fused kernels, beside the blocked form.

Each computes exactly ``attention.ttt_attention``: the query at i attends to step 0's keys at
j <= i of its own sample and to steps 1..k's keys at i. Both lay the keys of every step side by
side, (B, h_kv, (k+1)T, d), and mask that row:

    allowed(i, j) = j < T  and  j <= i  and  segment(j) == segment(i)     # step 0: causal, in-sample
                  | j >= T and  j mod T == i                              # steps 1..k: the diagonal

- ``sdpa``: ``scaled_dot_product_attention`` with that mask as a (B, 1, T, (k+1)T) bool tensor:
  memory quadratic in T (32K tokens at k = 7: 8 GiB of mask alone), so it runs only at short T.
- ``flex``: ``flex_attention`` with the mask as a ``BlockMask`` (128 x 128 tiles, only the tiles
  the rule touches): linear memory and no score matrix, but only compiled (``compiled=True``, the
  GPU path, the block mask compiled too); eager, as on CPU here, it builds the full scores and
  serves the tests (and has no backward on CPU in torch 2.13).

``benchmarks/bench_long_context.py`` measures the three on a GPU (benchmarks/gpu.sh); the tests
hold each to the dense reference (tests/drafter/test_attention_kernels.py).
"""

from __future__ import annotations

from functools import lru_cache

import torch

IMPLEMENTATIONS = ("blocked", "flex", "sdpa")


def ttt_mask(segments: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, T, steps * T) bool: may the query at i see the key at j (steps = k + 1 keys per position)."""
    T = segments.shape[1]
    i = torch.arange(T, device=segments.device)[:, None]
    j = torch.arange(steps * T, device=segments.device)[None, :]
    pos = j % T  # (1, steps * T) the key's position
    same = segments[:, :, None] == segments[:, pos[0]][:, None, :]  # (B, T, steps * T)
    return torch.where(j < T, (pos <= i) & same, pos == i)


def ttt_attention_sdpa(q: torch.Tensor, ks: list, vs: list, segments: torch.Tensor, block=None) -> torch.Tensor:
    """q (B, h, T, d); ks/vs one (B, h_kv, T, d) per step so far; -> (B, h, T, d)."""
    import torch.nn.functional as F

    mask = ttt_mask(segments, len(ks))[:, None]  # (B, 1, T, (k+1)T)
    return F.scaled_dot_product_attention(q, torch.cat(ks, 2), torch.cat(vs, 2), attn_mask=mask, enable_gqa=True)


# flex's keys are padded to a multiple of this many steps, so every step of a K <= 8 unroll has one
# shape: one compile per T instead of one per step (a compile costs tens of seconds).
FLEX_STEP_SLOTS = 8


def flex_length(T: int) -> int:
    """The length compiled flex runs a T-token batch at: the next power of two, at least one tile.

    Compiled flex (``dynamic=False``) compiles once per length, tens of seconds each, and a packed
    trainer's batches vary in length: at most log2(T) lengths compile, not one per batch. The padded
    positions form a sample of their own (segment 0, as padding is), so every tile they add beyond
    the diagonal is masked and skipped: the padding costs almost nothing."""
    return max(128, 1 << (T - 1).bit_length())


def ttt_attention_flex(
    q: torch.Tensor, ks: list, vs: list, segments: torch.Tensor, block=None, compiled: bool = False
) -> torch.Tensor:
    """As ``ttt_attention_sdpa``, through ``flex_attention`` and a block-sparse mask (padding keys
    beyond the live steps are masked, and their tiles skipped). Compiled, T is padded to ``flex_length``."""
    import torch.nn.functional as F

    B, _, T, _ = q.shape
    L = flex_length(T) if compiled else T  # the length flex runs at (compiled: once per length)
    if segments is None:
        segments = torch.ones(B, T, dtype=torch.long, device=q.device)
    segments = F.pad(segments, (0, L - T))  # the padding is a sample of its own (0, as padding is)
    slots = FLEX_STEP_SLOTS * -(-len(ks) // FLEX_STEP_SLOTS)
    live = torch.tensor(len(ks) * L, device=q.device)  # a tensor, so a new step count is no recompile

    def allowed(b, h, i, j):
        pos = j % L
        step0 = (j < L) & (pos <= i) & (segments[b, pos] == segments[b, i])
        return step0 | ((j >= L) & (j < live) & (pos == i))

    make_mask, attend = (_compiled_block_mask(), _compiled_flex()) if compiled else (_block_mask(), _flex())
    mask = make_mask(allowed, B, None, L, slots * L, device=q.device)
    keys, values = side_by_side(ks, L, slots), side_by_side(vs, L, slots)
    return attend(F.pad(q, (0, 0, 0, L - T)), keys, values, block_mask=mask, enable_gqa=True)[:, :, :T]


def side_by_side(xs: list, length: int, slots: int) -> torch.Tensor:
    """One (B, h, T, d) per step -> (B, h, slots * length, d): step i's at i * length, zeros elsewhere
    (the padding of each step and the empty slots written in the same one copy)."""
    B, h, T, d = xs[0].shape
    out = xs[0].new_zeros(B, h, slots, length, d)
    for i, x in enumerate(xs):
        out[:, :, i, :T] = x
    return out.flatten(2, 3)


def _block_mask():
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask


@lru_cache(maxsize=1)
def _compiled_block_mask():
    return torch.compile(_block_mask())  # eager, it would build the whole (T, slots T) mask first


def _flex():
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention


@lru_cache(maxsize=1)
def _compiled_flex():
    import torch._dynamo

    # one compile per flex_length (up to 9 between 128 and 32K, more with a varying batch size): past
    # dynamo's default limit of 8 it would fall back to eager flex, which builds the whole score matrix
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    return torch.compile(_flex(), dynamic=False)


def ttt_attention_for(name: str, compiled: bool = False):
    """The implementation called ``name`` (one of IMPLEMENTATIONS), with ``ttt_attention``'s signature."""
    from eagle3_core.drafter.attention import ttt_attention

    if name == "blocked":
        return ttt_attention
    if name == "sdpa":
        return ttt_attention_sdpa
    if name == "flex":
        return lambda q, ks, vs, segments, block=None: ttt_attention_flex(q, ks, vs, segments, compiled=compiled)
    raise ValueError(f"unknown TTT attention {name!r}; one of {IMPLEMENTATIONS}")
