"""Experiment tracking: one run in TensorBoard, W&B and MLflow that training and evaluation share.

Guarantees:
- Nothing here stops a run. A backend that fails to start or to write prints one warning line
  (``eagle3 tracking warning: ...``) and is dropped; training goes on with the others.
- A backend named in ``report_to`` whose package is missing is one ``ConfigError`` before any
  work (``check_backends``), naming the package and the install command.
- A resumed run continues the same run, with no step twice: TensorBoard purges the steps past
  the checkpoint (``purge_step``), W&B resumes by id and MLflow by run id (both ids kept in the
  checkpoint). Each backend says through which step it already holds the run (``through``:
  the checkpoint's step for TensorBoard, whose events are flushed each step; W&B's own next step
  less one, which offline is -1 since W&B buffers and a killed run's file may hold nothing; the
  step MLflow stored last, kept as a run tag in the same write); the trainer then sends its
  metrics.jsonl again up to the checkpoint and every backend takes only the steps past its own
  ``through``: a step it holds is never sent twice, one it lost is sent again.
- ``drafter/tracking.json`` names the run (each backend's id and store), so the evaluate stage
  logs its figures into the same run (``log_figures``: a handful of scalars, curves as one chart
  each, tables as one text each; ``figures.py``).

The backends' packages are imported only when a backend starts (``backends.py``): importing this
module costs nothing, and ``eagle3 --help`` stays fast.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eagle3_core.errors import ConfigError
from eagle3_core.tracking.figures import Figures
from eagle3_core.tracking.spec import RunSpec

RUN_FILE = "tracking.json"
TRACKING_EXTRA = "pip install 'eagle3[tracking]'"
# backend -> (module it imports, install command)
PACKAGES = {
    "tensorboard": ("tensorboard", "pip install tensorboard"),
    "wandb": ("wandb", f"{TRACKING_EXTRA} (or: pip install wandb)"),
    "mlflow": ("mlflow", f"{TRACKING_EXTRA} (or: pip install mlflow-skinny)"),
}


def check_backends(report_to: list[str]) -> None:
    """Refuse, before anything runs, a backend whose package is not installed."""
    for name in report_to:
        module, install = PACKAGES[name]
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"train.report_to names {name}, but the {module} package is not installed",
                fix=f"{install}, or remove {name} from train.report_to",
            )


def warn(message: str) -> None:
    """One line on stdout: the train launcher shows it in the stage's log."""
    print(f"eagle3 tracking warning: {message}", file=sys.stdout, flush=True)


class Tracker:
    """The started backends behind one interface; each call guarded, so none can stop training."""

    def __init__(self, backends: list | None = None, report: Callable[[str], None] = warn) -> None:
        self.backends, self.report = list(backends or []), report

    @classmethod
    def start(cls, names: list[str], spec: RunSpec, report: Callable[[str], None] = warn) -> Tracker:
        from eagle3_core.tracking.backends import BUILDERS

        tracker = cls([], report)
        for name in names:
            backend = BUILDERS[name](spec)
            if tracker._guard(backend, "start", backend.start):
                tracker.backends.append(backend)
        return tracker

    def _guard(self, backend, action: str, call: Callable[[], Any]) -> bool:
        try:
            call()
            return True
        except Exception as exc:  # noqa: BLE001 - a tracker must never stop a run
            detail = " ".join(str(exc).split())[:300]
            self.report(
                f"{backend.name} failed to {action} ({type(exc).__name__}: {detail}); the run goes on without it"
            )
            return False

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Scalars at ``step``; a backend that fails is dropped after its one warning."""
        if metrics:
            self.backends = [b for b in self.backends if self._guard(b, "write", lambda b=b: b.log(metrics, step))]

    def log_figures(self, figures: Figures, step: int) -> None:
        """A finished stage's figures (evaluation's), its scalars at ``step`` (the run's last):
        each backend renders them as it says (``backends.py``)."""
        if figures:
            self.backends = [
                b for b in self.backends if self._guard(b, "write", lambda b=b: b.log_figures(figures, step))
            ]

    def log_summary(self, metrics: dict[str, float], step: int) -> None:
        """Scalars of the whole run: W&B's summary, a step's scalars elsewhere."""
        self.log_figures(Figures(scalars=metrics), step)

    def ids(self) -> dict[str, dict]:
        """Each started backend's ids: kept in the checkpoint and in tracking.json."""
        return {b.name: b.ids() for b in self.backends}

    def close(self, failed: bool = False) -> None:
        for backend in self.backends:
            self._guard(backend, "finish", lambda b=backend: b.close(failed))
        self.backends = []


def flatten(prefix: str, value: Any) -> dict[str, float]:
    """Every number under ``value`` as ``prefix/key/.../index`` (lists by position); None, bools,
    strings are left out, so a report can grow sections (buckets, sweeps) without code here."""
    if isinstance(value, bool) or value is None:
        return {}
    if isinstance(value, int | float):
        return {prefix: float(value)}
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    found: dict[str, float] = {}
    for key, inner in items:
        found.update(flatten(f"{prefix}/{key}", inner))
    return found


def write_run_file(out_dir: Path, names: list[str], ids: dict[str, dict], spec: RunSpec) -> None:
    """drafter/tracking.json: where the run lives, for the evaluate stage."""
    from eagle3_core.run.fsio import write_json_atomic

    record = {
        "report_to": names,
        "project": spec.project,
        "run_name": spec.run_name,
        "wandb_entity": spec.wandb_entity,
        "wandb_mode": spec.wandb_mode,
        "mlflow_tracking_uri": spec.mlflow_tracking_uri,
        "ids": ids,
    }
    write_json_atomic(Path(out_dir) / RUN_FILE, record)


def reopen(drafter_dir: str | Path, report: Callable[[str], None] = warn) -> Tracker:
    """The run tracking.json names, reopened to add figures; an empty tracker when none is named."""
    from eagle3_core.run.fsio import read_json

    path = Path(drafter_dir) / RUN_FILE
    if not path.exists():
        return Tracker([], report)
    try:
        record = read_json(path)
        spec = RunSpec(
            Path(drafter_dir),
            record["project"],
            record["run_name"],
            record["wandb_entity"],
            record["wandb_mode"],
            record["mlflow_tracking_uri"],
            ids=record["ids"],
            reopen=True,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report(f"{path} cannot be read ({exc}); evaluation figures are not logged to the training run")
        return Tracker([], report)
    return Tracker.start([n for n in record["report_to"] if n in record["ids"]], spec, report)
