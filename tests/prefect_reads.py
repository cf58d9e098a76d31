"""Reads from the session's Prefect API that see every match, newest first.

The API holds every earlier test's runs, and it answers at most 200 rows a call, so a bare
``read_artifacts()`` late in the suite sees an arbitrary 200 of thousands."""

from __future__ import annotations

from datetime import datetime

PAGE = 200


def _every(read, **query) -> list:
    found, offset = [], 0
    while True:
        page = read(limit=PAGE, offset=offset, **query)
        found += page
        if len(page) < PAGE:
            return found
        offset += PAGE


def artifacts(*keys: str, flow_run_id=None) -> list:
    """The artifacts under ``keys`` (all of them when none are named), newest first."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    where = ArtifactFilter()
    if keys:
        where.key = ArtifactFilterKey(any_=list(keys))
    if flow_run_id is not None:
        where.flow_run_id = ArtifactFilterFlowRunId(any_=[flow_run_id])
    with get_client(sync_client=True) as client:
        return _every(client.read_artifacts, artifact_filter=where, sort=ArtifactSort.CREATED_DESC)


def logs_since(moment: datetime) -> list:
    """Every log line written at or after ``moment``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterTimestamp

    with get_client(sync_client=True) as client:
        return _every(client.read_logs, log_filter=LogFilter(timestamp=LogFilterTimestamp(after_=moment)))


def task_run_names(like: str) -> set[str]:
    """The names of every task run whose name contains ``like``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName

    with get_client(sync_client=True) as client:
        runs = _every(client.read_task_runs, task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_=like)))
    return {run.name for run in runs}
