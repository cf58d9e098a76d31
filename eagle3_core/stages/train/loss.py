"""The training-time-test loss and its accuracies.

Alignment (see drafter/model.py): step k at position i predicts the token at i+2+k; the label
is the target's distribution at position i+1+k (``final_hidden_states @ lm_head``), restricted
to the draft vocabulary and renormalised. A position counts when the token it predicts is
supervised (``loss_mask[i+2+k]``) and the target's own top token there is in the draft vocab.

    loss_k = mean over counted positions of  -sum_v p_target(v) log p_draft(v)
    loss   = sum_k decay^k loss_k
    acc_k  = share of counted positions where argmax p_draft == argmax p_target
    simulated acceptance length = 1 + sum_k prod_{j<=k} acc_j    (1 = the target's own token,
    as vLLM's ``1 + accepted / drafts`` counts it)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def shift(x: torch.Tensor, n: int) -> torch.Tensor:
    """x[:, n:] zero-padded back to length T along dim 1: position i reads i+n."""
    if n == 0:
        return x
    pad = x.new_zeros((x.shape[0], min(n, x.shape[1]), *x.shape[2:]))
    return torch.cat([x[:, n:], pad], dim=1)


class TargetHead:
    """The target's ``lm_head`` and the draft vocabulary, turning final states into labels."""

    def __init__(self, weight: torch.Tensor, d2t: torch.Tensor, t2d: torch.Tensor) -> None:
        self.weight = weight  # (V, H)
        self.draft_ids = torch.arange(len(d2t), device=d2t.device) + d2t  # (V_d,) target ids
        self.t2d = t2d.bool()

    @torch.no_grad()
    def labels(self, final: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(probs (B, T, V_d) over the draft vocab, in_draft (B, T) bool) at each position."""
        logits = final @ self.weight.to(final.dtype).T  # (B, T, V)
        in_draft = self.t2d[logits.argmax(-1)]  # (B, T)
        probs = logits[..., self.draft_ids].float().softmax(-1)  # (B, T, V_d)
        return probs, in_draft


@dataclass
class StepCounts:
    """Per unroll step: summed loss, counted positions, correct top-1 predictions."""

    loss: list[float] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    correct: list[int] = field(default_factory=list)

    def add(self, other: "StepCounts") -> None:
        if not self.count:
            self.loss, self.count, self.correct = (
                [0.0] * len(other.count),
                [0] * len(other.count),
                [0] * len(other.count),
            )
        for k in range(len(other.count)):
            self.loss[k] += other.loss[k] * other.count[k]
            self.count[k] += other.count[k]
            self.correct[k] += other.correct[k]

    def mean_losses(self) -> list[float]:
        """Per-step mean loss after ``add`` (which sums loss x count)."""
        return [l / n if n else 0.0 for l, n in zip(self.loss, self.count)]

    def accuracies(self) -> list[float]:
        return [c / n if n else 0.0 for c, n in zip(self.correct, self.count)]


def simulated_acceptance_length(acc: list[float]) -> float:
    """1 + sum_k prod_{j<=k} acc_j: the expected tokens per target step if drafts were chained."""
    total, chain = 1.0, 1.0
    for a in acc:
        chain *= a
        total += chain
    return total


# Positions per loss chunk: the chunk's draft logits (rows x V_d, fp32, a few copies in backward)
# stay near 256 MiB at V_d = 32K, and no step's full (T, V_d) logits are ever kept.
LOSS_CHUNK_ELEMENTS = 1 << 26


def _chunk_ce(
    out: torch.Tensor,
    probs: torch.Tensor,
    counted: torch.Tensor,
    target_top: torch.Tensor,
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed soft cross-entropy over the counted positions of one chunk, and its correct top-1s."""
    logits = logits_fn(out).float()  # (B, c, V_d)
    ce = -(probs * F.log_softmax(logits, dim=-1)).sum(-1)  # (B, c)
    return (ce * counted).sum(), ((logits.argmax(-1) == target_top) & counted).sum()


def _step_ce(
    out: torch.Tensor,
    probs: torch.Tensor,
    counted: torch.Tensor,
    target_top: torch.Tensor,
    k: int,
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, int]:
    """Step k's summed soft cross-entropy over its counted positions, and how many it got right,
    chunk by chunk (checkpointed under grad: one chunk's logits in memory at a time)."""
    B, n_pos = counted.shape
    chunk = max(1, LOSS_CHUNK_ELEMENTS // max(1, B * probs.shape[-1]))
    ce_sum, correct = out.sum() * 0.0, 0  # keeps the graph when n_pos = 0
    for s in range(0, n_pos, chunk):
        e = min(n_pos, s + chunk)
        args = (
            out[:, s:e],
            probs[:, s + 1 + k : e + 1 + k],
            counted[:, s:e],
            target_top[:, s + 1 + k : e + 1 + k],
            logits_fn,
        )
        part, right = checkpoint(_chunk_ce, *args, use_reentrant=False) if torch.is_grad_enabled() else _chunk_ce(*args)
        ce_sum, correct = ce_sum + part, correct + int(right)
    return ce_sum, correct


def ttt_loss(
    step_outputs: list[torch.Tensor],
    probs: torch.Tensor,
    in_draft: torch.Tensor,
    loss_mask: torch.Tensor,
    decay: float,
    segments: torch.Tensor | None = None,
    logits_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, StepCounts]:
    """Σ_k decay^k · soft cross-entropy of step k; and the per-step counts for metrics.

    ``step_outputs[k]`` (B, T, ·) is step k's logits, or its hidden states when ``logits_fn``
    (the drafter's ``norm`` + ``lm_head``) is given: then the logits are made chunk by chunk
    under activation checkpointing, so memory holds one chunk's logits, never a step's.
    ``segments`` (B, T) numbers packed samples: a position counts only when the token it
    predicts belongs to its own sample (the next sample's first tokens are never a label).
    """
    logits_fn = logits_fn or (lambda x: x)
    total = step_outputs[0].new_zeros((), dtype=torch.float32)
    counts, target_top = StepCounts(), probs.argmax(-1)  # (B, T)
    B, T = loss_mask.shape
    for k, out in enumerate(step_outputs):  # out: (B, T, ·)
        n_pos = max(T - 2 - k, 0)  # i + 2 + k must exist
        counted = loss_mask[:, 2 + k :] & in_draft[:, 1 + k : T - 1]  # (B, n_pos)
        if segments is not None:
            counted = counted & (segments[:, 2 + k :] == segments[:, :n_pos])
        ce_sum, correct = _step_ce(out, probs, counted, target_top, k, logits_fn)
        n = int(counted.sum())
        loss_k = ce_sum / max(n, 1)
        total = total + decay**k * loss_k
        counts.loss.append(float(loss_k.detach()))
        counts.count.append(n)
        counts.correct.append(correct)
    return total, counts
