"""What every flow and stage task shares: a Prefect-aware reporter, artifact helpers, and a
user's mistake failing a run in its one line.

Artifact keys must be lowercase letters, digits and dashes; ``artifact_key`` makes them so.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.states import Failed, State

from eagle3_core.errors import Eagle3Error
from eagle3_core.run.manifest import StageManifest
from tasks.user_errors import quiet_user_error_tracebacks

T = TypeVar("T")


def artifact_key(*parts: str) -> str:
    """A valid Prefect artifact key from free text (lowercase, digits, dashes)."""
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")[:100]


class PrefectReporter:
    """The core's ``Reporter``, speaking to Prefect: a progress artifact and the run logger.

    Progress updates are throttled (one per ``min_interval`` seconds) so a stage that reports
    per row does not flood the API.
    """

    def __init__(self, stage: str, min_interval: float = 2.0) -> None:
        self.stage, self.min_interval = stage, min_interval
        self._artifact_id: UUID | None = None
        self._last = 0.0
        self._logger = get_run_logger()

    def progress(self, stage: str, done: int, total: int | None, **figures: Any) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if now - self._last < self.min_interval and not finished:
            return
        self._last = now
        percent = 100.0 * done / total if total else 0.0
        description = ", ".join(f"{k}={v}" for k, v in figures.items()) or None
        if self._artifact_id is None:
            self._artifact_id = create_progress_artifact(
                percent, key=artifact_key(stage, "progress"), description=description
            )
        else:
            update_progress_artifact(self._artifact_id, percent, description=description)

    def log(self, message: str) -> None:
        self._logger.info(message)


def cell(value: object) -> str:
    """A value as a summary table shows it: no raw ``None``, floats to 4 significant digits (a raw
    acceptance length printed 16: 3.139784946236559)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return format(value, ".4g")
    return str(value)


def manifest_markdown(manifest: StageManifest, title: str | None = None) -> str:
    """A stage manifest as markdown: counts, timings, the flat details."""
    lines = [f"# {title or manifest.stage}", "", f"status: **{manifest.status}**", "", "| count | value |", "|---|---|"]
    lines += [f"| {k} | {cell(v)} |" for k, v in manifest.counts.items()]
    if manifest.timings:
        lines += ["", "| phase | seconds |", "|---|---|"]
        lines += [f"| {k} | {v:.2f} |" for k, v in manifest.timings.items()]
    for key, value in manifest.details.items():
        if isinstance(value, dict) and value and all(not isinstance(v, (dict, list)) for v in value.values()):
            lines += ["", f"**{key}**", "", "| key | value |", "|---|---|"]
            lines += [f"| {k} | {cell(v)} |" for k, v in value.items()]
        elif not isinstance(value, (dict, list)):
            lines += ["", f"**{key}**: {cell(value)}"]
    return "\n".join(lines)


def publish_manifest(manifest: StageManifest, title: str | None = None) -> None:
    """A markdown summary artifact of a stage manifest: counts, timings, details."""
    create_markdown_artifact(
        manifest_markdown(manifest, title),
        key=artifact_key(manifest.stage, "summary"),
        description=f"{manifest.stage} summary",
    )


def publish_table(rows: list[dict[str, Any]], key: str, description: str) -> None:
    create_table_artifact(rows, key=artifact_key(key), description=description)


def publish_image(path: str | Path, key: str, description: str) -> None:
    """An image as a markdown artifact (inline data URI), so it shows without an object store."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    create_markdown_artifact(
        f"![{description}](data:image/png;base64,{data})", key=artifact_key(key), description=description
    )


def ensure_limit(name: str, slots: int) -> None:
    """Create the global concurrency limit ``name`` with ``slots`` unless an operator already set it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=slots))
            except ObjectAlreadyExists:  # another run created it a moment ago
                pass


def failing_in_one_line(body: Callable[..., T], *args: Any) -> T | State:
    """``body(*args)``, a flow's body. A user's mistake (an ``Eagle3Error``: what was wrong, where, the
    fix) fails the run with its one line, ``error.message``, as the state's message, the line the run's
    page and `prefect flow-run ls` show, and is logged once, with its fix, without a traceback: Prefect
    logged a traceback for it three times (the task, the flow, the engine) and put
    ``Flow run encountered an exception: ConfigError: ...`` and the fix on one state. The exception
    stays the state's result: a parent flow's ``state.result()`` and a direct call raise it unchanged.
    Anything else is a bug and keeps Prefect's traceback."""
    quiet_user_error_tracebacks()
    try:
        return body(*args)
    except Eagle3Error as exc:
        get_run_logger().error("error: %s", exc)
        return Failed(message=exc.message, data=exc)
