"""The three tracking backends, each behind ``start``, ``log``, ``log_figures``, ``ids``, ``close``.

Each imports its package in ``start`` (never at module import). Where each writes:

- TensorBoard: event files in ``drafter/tensorboard/``; a fresh run deletes the old ones, a
  resumed run opens its writer with ``purge_step`` = the checkpoint's step + 1, so TensorBoard
  drops the killed run's later steps when it reads the files.
- W&B: ``drafter/wandb/``; offline (``WANDB_MODE=offline``) unless a key is there and the server
  answers within 3 s, so a run never waits on W&B (``wandb sync drafter/wandb/offline-run-*``
  uploads an offline run later). Console capture is off: the launcher reads the trainer's stdout.
- MLflow: the configured tracking URI or ``$MLFLOW_TRACKING_URI``, else ``sqlite:///drafter/mlflow.db``
  (MLflow 3 keeps its file store in maintenance; sqlite needs SQLAlchemy and Alembic, which
  Prefect already brings) with artifacts in ``drafter/mlflow-artifacts/``. The client API with an
  explicit run id throughout: no process-global active run. An ``http(s)`` server that does not
  accept a connection within 3 s fails the start (one warning line); MLflow's own client would
  retry a refused connection 7 times with backoff, about 4 minutes before the first step. Its
  retries are capped at 2 (``$MLFLOW_HTTP_REQUEST_MAX_RETRIES`` unless set), so a server lost
  mid-run costs one write of about 10 s, then the warning.

``log_figures`` (a finished stage's ``Figures``: evaluation's) renders each shape as one thing
in every backend; what the user sees is said at each backend's method.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import time
from urllib.parse import urlparse

from eagle3_core.tracking.figures import Figures
from eagle3_core.tracking.spec import RunSpec

WANDB_HOST = "https://api.wandb.ai"
WANDB_PROBE_S = 3.0
WANDB_INIT_S = 30.0  # an online start slower than this is a warning, not a wait (W&B's default is 90 s)
MLFLOW_PROBE_S = 3.0
MLFLOW_RETRIES = "2"  # MLflow's default 7 (backoff factor 2) holds a refused write about 4 minutes
STEP_TAG = "eagle3.last_step"  # MLflow: the last step stored
MLFLOW_BATCH = 100  # MLflow's log_batch takes at most 100 params and 1000 metrics a call


class TensorBoardBackend:
    name = "tensorboard"

    def __init__(self, spec: RunSpec) -> None:
        self.spec, self.writer = spec, None
        self.log_dir = spec.out_dir / "tensorboard"
        # the killed run's events up to the checkpoint are on disk (flushed each step); the rest purged
        known = spec.ids.get(self.name) and spec.resume_step is not None and not spec.reopen
        self.through = spec.resume_step if known else -1

    def start(self) -> None:
        from torch.utils.tensorboard import SummaryWriter

        if self.spec.resume_step is None and not self.spec.reopen:
            shutil.rmtree(self.log_dir, ignore_errors=True)  # a fresh run: the old events are another run's
        purge = self.spec.resume_step + 1 if self.spec.resume_step is not None and not self.spec.reopen else None
        self.writer = SummaryWriter(str(self.log_dir), purge_step=purge)
        if self.spec.resume_step is None and not self.spec.reopen:  # once per run: the killed run wrote it
            text = "```json\n" + json.dumps(self.spec.params, indent=2, default=str) + "\n```"
            self.writer.add_text("run/params", text, global_step=0)

    def log(self, metrics: dict[str, float], step: int) -> None:
        if step <= self.through:
            return
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()  # a watcher sees each step as it lands

    def log_figures(self, figures: Figures, step: int) -> None:
        """Time Series tab: a card per scalar, one point at the run's last step (a single point,
        which smoothing cannot move); a card per curve line, ``<curve>/<line>``, whose x axis is the
        curve's x (the context bucket's index, not a training step; TensorBoard smooths it like any
        series: its Smoothing setting at 0 shows the values, the table says them); the same lines
        on one chart in the Custom Scalars tab. Text tab: each table, rendered as markdown."""
        for key, value in figures.scalars.items():
            self.writer.add_scalar(key, value, global_step=step)
        layout = {}
        for name, curve in figures.curves.items():
            for line, points in curve.lines.items():
                for x, y in points:
                    self.writer.add_scalar(f"{name}/{line}", y, global_step=x)
            title = f"{name} (x: {curve.x_label}, {', '.join(f'{i} = {t}' for i, t in enumerate(curve.ticks))})"
            layout[title] = ["Multiline", [f"^{re.escape(f'{name}/{line}')}$" for line in curve.lines]]  # regexes
        if layout:
            self.writer.add_custom_scalars({next(iter(figures.curves)).split("/")[0]: layout})
        for name, table in figures.tables.items():
            self.writer.add_text(name, table.markdown(), global_step=step)
        self.writer.flush()

    def ids(self) -> dict:
        return {"log_dir": str(self.log_dir)}

    def close(self, failed: bool) -> None:
        self.writer.close()


def wandb_mode(configured: str, env: dict | None = None) -> str:
    """online only when it cannot block: a key is there and the server answers at once."""
    env = os.environ if env is None else env
    if configured != "auto":
        return configured
    if env.get("WANDB_MODE"):
        return env["WANDB_MODE"]
    if not (env.get("WANDB_API_KEY") or _netrc_has(urlparse(env.get("WANDB_BASE_URL", WANDB_HOST)).hostname)):
        return "offline"
    url = urlparse(env.get("WANDB_BASE_URL", WANDB_HOST))
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=WANDB_PROBE_S):
            return "online"
    except OSError:
        return "offline"


def _netrc_has(host: str | None) -> bool:
    import netrc

    try:
        return bool(host) and netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


class WandbBackend:
    name = "wandb"

    def __init__(self, spec: RunSpec) -> None:
        self.spec, self.run = spec, None
        # a resumed run keeps the mode it began in: one run is all offline files or all on the server
        self.mode = spec.ids.get(self.name, {}).get("mode") or wandb_mode(spec.wandb_mode)
        self.through = -1

    def start(self) -> None:
        import wandb

        known = self.spec.ids.get(self.name, {})
        self.run = wandb.init(
            project=self.spec.project,
            entity=self.spec.wandb_entity,
            name=self.spec.run_name,
            id=known.get("id") or secrets.token_hex(6),  # W&B ids: lowercase letters and digits
            resume="allow",
            dir=str(self.spec.out_dir),
            mode=self.mode,
            config=None if self.spec.reopen else self.spec.params,
            settings=wandb.Settings(console="off", silent=True, init_timeout=WANDB_INIT_S),
        )
        # the step W&B expects next: online a resumed run's last step + 1, offline 0 (it knows none)
        self.through = self.run.step - 1

    def log(self, metrics: dict[str, float], step: int) -> None:
        if step > self.through:  # W&B's steps only go forward: one it holds stays as it is
            self.run.log(metrics, step=step)

    def log_figures(self, figures: Figures, step: int) -> None:
        """Scalars: the run's summary (the Overview page and a column each in the runs table; no
        chart, since they have no history). A curve: one line chart (``wandb.plot.line``, a line per
        ``line``, x the curve's x) over its ``wandb.Table`` (``<curve>_table``: x, tick, line, y).
        A table: a ``wandb.Table`` panel. Both in one history row at the run's last step (or W&B's
        next, online, where the resumed run is past it: its steps only go forward)."""
        import wandb

        self.run.summary.update(figures.scalars)
        payload = {}
        for name, curve in figures.curves.items():
            rows = [[x, curve.ticks[x], line, y] for line, points in curve.lines.items() for x, y in points]
            table = wandb.Table(columns=[curve.x_label, "tick", "line", curve.y_label], data=rows)
            payload[name] = wandb.plot.line(table, curve.x_label, curve.y_label, stroke="line", title=name)
        for name, table in figures.tables.items():
            payload[name] = wandb.Table(columns=table.columns, data=table.rows)
        if payload:
            self.run.log(payload, step=max(step, self.run.step))

    def ids(self) -> dict:
        return {"id": self.run.id, "mode": self.mode, "dir": str(self.spec.out_dir / "wandb")}

    def close(self, failed: bool) -> None:
        self.run.finish(exit_code=1 if failed else 0)


class MlflowBackend:
    name = "mlflow"

    def __init__(self, spec: RunSpec) -> None:
        self.spec, self.client, self.run_id = spec, None, None
        known = spec.ids.get(self.name, {})
        local = f"sqlite:///{(spec.out_dir / 'mlflow.db').resolve()}"
        self.uri = (
            known.get("tracking_uri") or spec.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or local
        )
        self.local = self.uri == local
        self.through = -1

    def start(self) -> None:
        from mlflow.tracking import MlflowClient

        reach_server(self.uri)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", MLFLOW_RETRIES)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.run_id = self.spec.ids.get(self.name, {}).get("run_id")
        if self.run_id is not None:
            self.client.update_run(self.run_id, status="RUNNING")
            if not self.spec.reopen:  # what the killed run stored, not what it meant to
                self.through = int(self.client.get_run(self.run_id).data.tags.get(STEP_TAG, -1))
            return
        self.run_id = self.client.create_run(self._experiment(), run_name=self.spec.run_name).info.run_id
        self._log_params()

    def _experiment(self) -> str:
        found = self.client.get_experiment_by_name(self.spec.project)
        if found is not None:
            return found.experiment_id
        artifacts = (self.spec.out_dir / "mlflow-artifacts").resolve().as_uri() if self.local else None
        return self.client.create_experiment(self.spec.project, artifact_location=artifacts)

    def _log_params(self) -> None:
        from mlflow.entities import Param

        params = [Param(k.replace("/", "."), str(v)[:6000]) for k, v in _param_leaves("", self.spec.params).items()]
        for first in range(0, len(params), MLFLOW_BATCH):
            self.client.log_batch(self.run_id, params=params[first : first + MLFLOW_BATCH])

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric, RunTag

        if step <= self.through:  # MLflow keeps every value sent: a step it holds is not sent again
            return
        now = int(time.time() * 1000)
        metrics_at = [Metric(k, v, now, step) for k, v in metrics.items()]
        # the step tag goes in the same write: after a kill it says exactly what MLflow holds
        self.client.log_batch(self.run_id, metrics=metrics_at, tags=[RunTag(STEP_TAG, str(step))])

    def log_figures(self, figures: Figures, step: int) -> None:
        """Scalars: a metric each at the run's last step (the run page's Metrics table, a chart of
        one point each). A curve: a metric per line, ``<curve>/<line>``, whose step is the curve's x
        (the context bucket's index): a chart per line in Model metrics, x = that index. A table:
        a markdown artifact ``<name>.md`` (the run's Artifacts tab renders it)."""
        from mlflow.entities import Metric

        if figures.scalars:
            self.log(figures.scalars, step)
        now = int(time.time() * 1000)
        points = [
            Metric(f"{name}/{line}", y, now, x)
            for name, curve in figures.curves.items()
            for line, values in curve.lines.items()
            for x, y in values
        ]
        for first in range(0, len(points), 1000):  # log_batch's limit; no step tag: x is no training step
            self.client.log_batch(self.run_id, metrics=points[first : first + 1000])
        for name, table in figures.tables.items():
            self.client.log_text(self.run_id, table.markdown(), f"{name}.md")

    def ids(self) -> dict:
        return {"run_id": self.run_id, "tracking_uri": self.uri}

    def close(self, failed: bool) -> None:
        self.client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")


def reach_server(uri: str) -> None:
    """An http(s) tracking server must accept a connection at once; other stores are files."""
    url = urlparse(uri)
    if url.scheme not in ("http", "https"):
        return
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=MLFLOW_PROBE_S).close()
    except OSError as exc:
        raise ConnectionError(f"the MLflow server {uri} does not answer ({exc})") from exc


def _param_leaves(prefix: str, value) -> dict[str, object]:
    """Nested params as dotted leaves (lists and strings kept whole: MLflow params are strings)."""
    if not isinstance(value, dict):
        return {prefix: value}
    found: dict[str, object] = {}
    for key, inner in value.items():
        found.update(_param_leaves(f"{prefix}.{key}" if prefix else str(key), inner))
    return found


BUILDERS = {"tensorboard": TensorBoardBackend, "wandb": WandbBackend, "mlflow": MlflowBackend}
