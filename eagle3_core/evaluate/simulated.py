"""The acceptance length the training metrics predict, beside the measured ones.

Training-time test step j is scored with the true tokens as inputs, so its accuracy acc_j
approximates "draft j is right given drafts 0..j-1 were". A chain of k drafts then keeps
i+1 tokens with probability prod_{j<=i} acc_j, and

    simulated acceptance length = 1 + sum_{i<k} prod_{j<=i} acc_j   (bonus token included)

It is computed from the last record of ``drafter/metrics.jsonl`` that carries per-step
accuracies (``acc_per_step``: [acc_0, acc_1, ...], or ``acc_0``, ``acc_1``, ... keys).
Teacher-forced on training data, it is an upper estimate; the report shows it as such.
"""

from __future__ import annotations

import json
from pathlib import Path

LIST_KEYS = ("acc_per_step", "accuracy_per_step", "acc", "accuracies")


def step_accuracies(record: dict) -> list[float] | None:
    """Per-step accuracies of one metrics record, in step order, or None."""
    for key in LIST_KEYS:
        if isinstance(record.get(key), list) and record[key]:
            return [float(x) for x in record[key]]
    steps, j = [], 0
    while isinstance(record.get(f"acc_{j}"), (int, float)):
        steps.append(float(record[f"acc_{j}"]))
        j += 1
    return steps or None


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
    accuracies, step = None, None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash: the previous record stands
        found = step_accuracies(record) if isinstance(record, dict) else None
        if found:
            accuracies, step = found, record.get("step")
    if accuracies is None:
        return None
    return {"acceptance_length": simulated_length(accuracies, k), "k": k, "step_accuracies": accuracies,
            "training_step": step, "steps_available": len(accuracies),
            "note": "k exceeds the trained unroll; later positions count as never accepted"
                    if k > len(accuracies) else None}
