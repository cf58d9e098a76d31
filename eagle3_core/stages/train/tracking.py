"""The trainer's side of tracking: which run rank 0 opens, and what each metrics line becomes.

Only rank 0 tracks (the others get an empty ``Tracker``). The run's parameters are the train
config and the run's facts (recipe hash, mode, hidden-state engine, eagle3's version: see
``provenance``). A metrics line (``metrics.jsonl``) becomes scalars named by its split:
``train/loss``, ``train/loss_k/0``, ``train/acc_k/0``, ``train/lr``, ``train/tokens_per_s``
(all ranks), ``train/sim_acceptance_length``; held-out lines ``heldout/...`` at their step, and
the final held-out line's figure once more as ``heldout/final_sim_acceptance_length``, a series of
one point: TensorBoard smooths every series (weight 0.6 by default, a UI setting no event file can
change), which draws the held-out curve of two points (initial, final) at 0.375 x the first +
0.625 x the last (2.61 for 1.0 then 3.57); one point it draws as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.metrics import read_metrics
from eagle3_core.tracking import RunSpec, Tracker, flatten, warn, write_run_file

NOT_SCALARS = ("step", "split", "name", "total_steps")


def metrics_of(record: dict[str, Any]) -> dict[str, float]:
    """A metrics line's scalars, named ``<split>/<key>[/<unroll step>]``. The held-out figures of the untrained
    drafter are ``heldout/initial/<key>``, one point each, not the first point of the ``heldout/<key>`` curves:
    TensorBoard's default smoothing (0.6) drew a two-point curve from 0.034 to 0.9212 as ending at 0.5885."""
    split = record.get("split", "train")
    if split == "heldout" and record.get("name") == "initial":
        split = "heldout/initial"
    found = flatten(split, {k: v for k, v in record.items() if k not in NOT_SCALARS})
    if split == "heldout" and record.get("name") == "final" and "heldout/sim_acceptance_length" in found:
        found["heldout/final_sim_acceptance_length"] = found["heldout/sim_acceptance_length"]
    return found


def run_spec(cfg: TrainConfig, facts: dict, out: Path, client: dict | None) -> RunSpec:
    t = cfg.tracking
    return RunSpec(
        out_dir=out,
        project=t.project,
        run_name=t.run_name or out.resolve().parent.name,
        wandb_entity=t.wandb_entity,
        wandb_mode=t.wandb_mode,
        mlflow_tracking_uri=t.mlflow_tracking_uri,
        params={"train": cfg.model_dump(mode="json"), "run": facts},
        resume_step=int(client["step"]) if client is not None else None,
        ids=(client or {}).get("tracking", {}),
    )


def start_tracker(cfg: TrainConfig, facts: dict, metrics: Path, rank: int, client: dict | None) -> Tracker:
    """Rank 0's tracker, resumed from the checkpoint's ``client`` state when there is one; a resumed
    run sends ``metrics`` (drafter/metrics.jsonl, cut at the checkpoint) again, and each backend
    takes the steps it does not hold."""
    if rank != 0 or not cfg.report_to:
        return Tracker([])
    out = metrics.parent
    spec = run_spec(cfg, facts, out, client)
    tracker = Tracker.start(list(cfg.report_to), spec)
    if client is not None:
        for record in read_metrics(metrics):
            log_record(tracker, record)
    try:
        write_run_file(out, [b.name for b in tracker.backends], tracker.ids(), spec)
    except OSError as exc:
        warn(f"cannot write {out / 'tracking.json'} ({exc}): evaluate will not find the run")
    return tracker


def log_record(tracker: Tracker, record: dict[str, Any]) -> None:
    """``MetricsLog``'s sink: every line it writes goes to the run at the line's step."""
    tracker.log(metrics_of(record), int(record["step"]))
