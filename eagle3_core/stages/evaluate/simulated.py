"""The acceptance length the training metrics predict, beside the measured ones.

Training-time test step j is scored with the true tokens as inputs, so its accuracy acc_j
approximates "draft j is right given drafts 0..j-1 were". A chain of k drafts then keeps
i+1 tokens with probability prod_{j<=i} acc_j, and

    simulated acceptance length = 1 + sum_{i<k} prod_{j<=i} acc_j   (bonus token included)

It is computed from ``drafter/metrics.jsonl`` (the train stage's ``acc_k`` lists): the last
held-out record (``split: heldout``) when there is one, else the last training record, which,
teacher-forced on training data, is an upper estimate. The report names the split.
"""

from __future__ import annotations

import json
from pathlib import Path


def step_accuracies(record: dict) -> list[float] | None:
    """Per-step accuracies of one metrics record (its ``acc_k`` list, in step order), or None."""
    found = record.get("acc_k")
    return [float(x) for x in found] if isinstance(found, list) and found else None


def simulated_length(accuracies: list[float], k: int) -> float:
    total, prod = 1.0, 1.0
    for acc in accuracies[:k]:
        prod *= acc
        total += prod
    return total


def simulated_acceptance(metrics_path: str | Path, k: int) -> dict | None:
    """The simulated figures at k (and per step), or None when there are no training metrics."""
    path = Path(metrics_path)
    if not path.exists():
        return None
    latest: dict[str, tuple[list[float], object]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash: the previous record stands
        found = step_accuracies(record) if isinstance(record, dict) else None
        if found:
            latest[record.get("split", "train")] = (found, record.get("step"))
    split = "heldout" if "heldout" in latest else "train" if "train" in latest else None
    if split is None:
        return None
    accuracies, step = latest[split]
    return {
        "acceptance_length": simulated_length(accuracies, k),
        "k": k,
        "split": split,
        "step_accuracies": accuracies,
        "training_step": step,
        "note": "k exceeds the trained unroll; later positions count as never accepted"
        if k > len(accuracies)
        else None,
    }
