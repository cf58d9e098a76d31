"""Training metrics: one JSON line per logged step in drafter/metrics.jsonl, and a loss-curve plot.

A line: ``step``, ``loss``, ``loss_k`` and ``acc_k`` (per unroll step), ``accepted_per_draft``
(Σ_k Π_{j<=k} acc_j), ``sim_acceptance_length`` (1 + that), ``lr``, ``tokens``,
``tokens_per_s``, ``elapsed_s``; all of the step's global batch (every rank's micro-batches);
held-out lines carry ``split: "heldout"``. The trainer prints each line to stdout prefixed
with ``METRICS `` so the launcher can stream progress. On resume the lines past the resumed
step are dropped, so the file always describes one run. Each line written also goes to
``sink`` when one is set (the experiment trackers, ``train.tracking``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eagle3_core.contracts.metrics import last_step, line_step

PREFIX = "METRICS "


class MetricsLog:
    def __init__(self, path: str | Path, enabled: bool = True) -> None:
        self.path, self.enabled = Path(path), enabled
        self.sink: Callable[[dict[str, Any]], None] | None = None

    def last_step(self) -> int:
        """The highest step written so far (-1 for none): how far a killed run had reported."""
        return last_step(self.path)

    def truncate_after(self, step: int) -> None:
        """Keep only lines up to ``step`` (a resumed run rewrites what came after); a line a kill
        cut short is dropped too (it can only be the last one written)."""
        if not self.enabled or not self.path.exists():
            return
        lines = [l for l in self.path.read_text().splitlines() if (n := line_step(l)) is not None and n <= step]
        self.path.write_text("".join(l + "\n" for l in lines))

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        line = json.dumps(record, sort_keys=False)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        print(PREFIX + line, flush=True)
        if self.sink is not None:
            self.sink(record)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def plot_loss_curve(metrics_file: str | Path, out_png: str | Path) -> Path:
    """Loss and step-0 accuracy against step (train), held-out acceptance length as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_file)
    train = [r for r in rows if r.get("split", "train") == "train"]
    held = [r for r in rows if r.get("split") == "heldout"]
    fig, (ax_loss, ax_al) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], lw=1)
    ax_loss.set(xlabel="step", ylabel="TTT loss (Σ decay^k loss_k)", title="training loss")
    ax_al.plot([r["step"] for r in train], [r["sim_acceptance_length"] for r in train], lw=1, label="train batch")
    ax_al.plot([r["step"] for r in held], [r["sim_acceptance_length"] for r in held], "o-", label="held-out")
    ax_al.set(xlabel="step", ylabel="1 + Σ_k Π acc_j", title="simulated acceptance length")
    ax_al.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return Path(out_png)
