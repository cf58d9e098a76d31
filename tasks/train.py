"""The train stage's own artifacts: the loss curve (PNG), the held-out simulated acceptance
length before and after training, and in mode online-vllm the engine that fed the trainer
(``train-engine``). The trainer's output streams into the task's log through the reporter; a
failed trainer fails the task with the trainer's own error.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.contracts.details import TrainDetails
from eagle3_core.run.manifest import StageManifest
from tasks.common import publish_image, publish_table


def publish(stage, manifest: StageManifest) -> None:
    publish_training_artifacts(manifest, stage.out_dir)
    publish_engine(manifest)


def publish_engine(manifest: StageManifest) -> None:
    """online-vllm: the engine that fed the trainer (started with the run, or the recipe's endpoint),
    its throughput and spool peak, the trainer's waits, and whether epochs reused or recomputed states."""
    online = TrainDetails.of(manifest).online
    if not online:
        return
    source = (
        f"endpoint {online['endpoint']}"
        if online.get("endpoint")
        else f"{online['engine']} engine started with the run"
    )
    rows = [{"figure": "source", "value": source}] + [
        {"figure": key, "value": online.get(key)}
        for key in (
            "engine_startup_s",
            "engine_tokens",
            "engine_tokens_per_s",
            "spool_peak_bytes",
            "budget_bytes",
            "reuse",
            "unique_tokens",
            "computed_tokens",
            "recomputed_tokens",
            "busy_share",
            "wait_s",
            "first_wait_s",
        )
    ]
    publish_table(rows, key="train-engine", description=f"train: hidden states from the {source}")


def publish_training_artifacts(manifest: StageManifest, out_dir: Path) -> None:
    """The loss curve and the held-out acceptance table (before vs after training)."""
    from eagle3_core.stages.train.metrics import plot_loss_curve

    metrics = out_dir / "metrics.jsonl"
    if metrics.exists():
        png = plot_loss_curve(metrics, out_dir / "loss_curve.png")
        publish_image(png, key="train-loss-curve", description="train: loss and simulated acceptance length")
    rows, details = [], TrainDetails.of(manifest)
    for name, record in (("heldout_initial", details.heldout_initial), ("heldout_final", details.heldout_final)):
        if record:
            rows.append(
                {
                    "when": name.removeprefix("heldout_"),
                    "step": record.get("step"),
                    "sim_acceptance_length": record["sim_acceptance_length"],
                    "acc_k": ", ".join(f"{a:.3f}" for a in record["acc_k"]),
                }
            )
    if rows:
        publish_table(
            rows,
            key="train-heldout-acceptance",
            description="train: held-out simulated acceptance length, untrained vs trained",
        )
