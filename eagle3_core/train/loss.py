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

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


def shift(x: torch.Tensor, n: int) -> torch.Tensor:
    """x[:, n:] zero-padded back to length T along dim 1: position i reads i+n."""
    if n == 0:
        return x
    pad = x.new_zeros((x.shape[0], min(n, x.shape[1]), *x.shape[2:]))
    return torch.cat([x[:, n:], pad], dim=1)


class TargetHead:
    """The target's ``lm_head`` and the draft vocabulary, turning final states into labels."""

    def __init__(self, weight: torch.Tensor, d2t: torch.Tensor, t2d: torch.Tensor) -> None:
        self.weight = weight                                                   # (V, H)
        self.draft_ids = torch.arange(len(d2t), device=d2t.device) + d2t       # (V_d,) target ids
        self.t2d = t2d.bool()

    @torch.no_grad()
    def labels(self, final: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(probs (B, T, V_d) over the draft vocab, in_draft (B, T) bool) at each position."""
        logits = final @ self.weight.to(final.dtype).T                         # (B, T, V)
        in_draft = self.t2d[logits.argmax(-1)]                                 # (B, T)
        probs = logits[..., self.draft_ids].float().softmax(-1)                # (B, T, V_d)
        return probs, in_draft


@dataclass
class StepCounts:
    """Per unroll step: summed loss, counted positions, correct top-1 predictions."""

    loss: list[float] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    correct: list[int] = field(default_factory=list)

    def add(self, other: "StepCounts") -> None:
        if not self.count:
            self.loss, self.count, self.correct = [0.0] * len(other.count), [0] * len(other.count), [0] * len(other.count)
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


def ttt_loss(step_logits: list[torch.Tensor], probs: torch.Tensor, in_draft: torch.Tensor,
             loss_mask: torch.Tensor, decay: float,
             segments: torch.Tensor | None = None) -> tuple[torch.Tensor, StepCounts]:
    """Σ_k decay^k · soft cross-entropy of step k; and the per-step counts for metrics.

    ``segments`` (B, T) numbers packed samples: a position counts only when the token it predicts
    belongs to its own sample (the next sample's first tokens are never a label).
    """
    total = step_logits[0].new_zeros((), dtype=torch.float32)
    counts = StepCounts()
    for k, logits in enumerate(step_logits):                                  # logits: (B, T, V_d)
        p = shift(probs, 1 + k)                                                # (B, T, V_d)
        counted = shift(loss_mask, 2 + k) & shift(in_draft, 1 + k)             # (B, T)
        if segments is not None:
            counted = counted & (shift(segments, 2 + k) == segments)
        n = counted.sum()
        ce = -(p * F.log_softmax(logits.float(), dim=-1)).sum(-1)              # (B, T)
        loss_k = (ce * counted).sum() / n.clamp(min=1)
        total = total + decay**k * loss_k
        correct = ((logits.argmax(-1) == p.argmax(-1)) & counted).sum()
        counts.loss.append(float(loss_k.detach()))
        counts.count.append(int(n))
        counts.correct.append(int(correct))
    return total, counts
