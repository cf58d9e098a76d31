"""The Prefect parts of the generate stage: its endpoint limits and its table.

Its flow is built from its declaration like every stage's (``tasks/stage.py``): ``generate-plan``
(the probe, the pre-flight, the resume scan), one ``generate-stream`` task for the whole input,
``generate-release``, ``generate-finish``; ``prepare(stage)`` and ``publish(stage, manifest)`` here
are its hooks. Never one task per request: Prefect's per-task overhead (tens of milliseconds and
several API calls) would cap a per-request design far below a server's 128 requests/s. Nor one
task per batch: a batch waits for its slowest row while the endpoint idles (issue 13 measured 0.41x of a
bare loop). ``generate-stream`` runs the core's engine over every row; Prefect shows it through
the progress artifact and one log line per shard written.

Each endpoint's capacity is a global concurrency limit named after it (``vllm:{host}:{port}``),
shared by every run that sends to it; ``PrefectLimits`` lets the core hold slots of it in leased
chunks (``eagle3_core/generate/slots.py``), so two runs split a server instead of doubling its
queue, and a killed run's slots come back when its leases lapse: the API's sweep gives them back
(``prefect server``'s repossessor; on the command's own ephemeral API, ``tasks/ephemeral_api.py``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from eagle3_core.contracts.details import GenerateDetails
from tasks.common import ensure_limit, publish_table

if TYPE_CHECKING:
    from eagle3_core.generate.stage import GenerateStage
    from eagle3_core.manifest import StageManifest

RUNS_LIMIT = 1_000_000  # the ``:runs`` counter bounds nothing: it only counts the runs with work


def endpoint_limit_name(url: str) -> str:
    """The global concurrency limit of one serving endpoint: ``vllm:{host}:{port}``."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"vllm:{parts.hostname}:{port}"


def ensure_limits(names: list[str], slots: int) -> None:
    """Create missing limits with ``slots`` (and each one's ``:runs`` counter); keep an
    operator's existing value."""
    for name in names:
        ensure_limit(name, slots)
        ensure_limit(f"{name}:runs", RUNS_LIMIT)


class PrefectLimits:
    """The core's ``SharedLimits`` on Prefect global concurrency limits with leases."""

    def __init__(self, urls: list[str]) -> None:
        from prefect.client.schemas.objects import ConcurrencyLeaseHolder
        from prefect.runtime import flow_run

        self.names = {url: endpoint_limit_name(url) for url in urls}
        self.holder = ConcurrencyLeaseHolder(type="flow_run", id=flow_run.id) if flow_run.id else None
        self._client = None  # one client for the run: opening one per call cost ~150 ms here, a call ~8 ms

    def limit(self, url: str) -> int:
        return self._client_call(lambda c: c.read_global_concurrency_limit_by_name(self.names[url]).limit)

    def runs(self, url: str) -> int:
        return self._client_call(
            lambda c: c.read_global_concurrency_limit_by_name(f"{self.names[url]}:runs").active_slots
        )

    def take(self, url: str, slots: int, lease_seconds: float) -> Hashable | None:
        return self._lease(self.names[url], slots, lease_seconds)

    def join(self, url: str, lease_seconds: float) -> Hashable:
        lease = self._lease(f"{self.names[url]}:runs", 1, lease_seconds)
        assert lease is not None, "the :runs counter is never full"
        return lease

    def renew(self, lease: Hashable, lease_seconds: float) -> bool:
        import httpx

        try:
            self._client_call(lambda c: c.renew_concurrency_lease(lease, lease_seconds))
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code in (404, 410):
                return False
            raise
        return True

    def give_back(self, lease: Hashable) -> None:
        self._client_call(lambda c: c.release_concurrency_slots_with_lease(lease))

    def starved(self, url: str, seconds: float) -> str:
        name = self.names[url]
        return (
            f"generate: no slot of {name} free for {seconds:.0f} s: other runs hold all of them, or a killed "
            f"run left them leased on a Prefect API that sweeps no expired lease (a `prefect server` without its "
            f"repossessor, an ephemeral API not started by eagle3); fix: once no other run uses {url}, "
            f"`prefect gcl update {name} --active-slots 0`"
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.__exit__(None, None, None)
            self._client = None

    def _lease(self, name: str, slots: int, lease_seconds: float) -> Hashable | None:
        import httpx

        try:
            response = self._client_call(
                lambda c: c.increment_concurrency_slots_with_lease(
                    [name], slots, "concurrency", lease_seconds, self.holder
                )
            )
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 423:  # locked: fewer than ``slots`` free
                return None
            raise
        return response.json()["lease_id"]

    def _client_call(self, fn):
        from prefect.client.orchestration import get_client

        if self._client is None:  # opened in the caller's context (the API URL is a context setting)
            self._client = get_client(sync_client=True).__enter__()
        return fn(self._client)


def prepare(stage: GenerateStage) -> None:
    """Before the driver opens the folder: for the served source its share of each endpoint's limit
    (created where missing; ``source: dataset`` sends nothing, so it needs no limit and no endpoint)."""
    cfg = stage.cfg
    if cfg.source == "server":
        from eagle3_core.endpoint.concurrency import controller_for

        slots = controller_for(cfg).max  # the most this run keeps in flight on an endpoint
        ensure_limits(sorted({endpoint_limit_name(url) for url in cfg.base_urls}), slots)
        stage.shared = PrefectLimits(cfg.base_urls)  # closed by the stage's close, in generate-release


def publish(stage: GenerateStage, manifest: StageManifest) -> None:
    """Beside the manifest's summary: one table of every figure."""
    rows = [{"group": "count", "name": k, "value": v} for k, v in manifest.counts.items()]
    details = GenerateDetails.of(manifest)
    groups = {
        "reject_reasons": details.reject_reasons,
        "open_reasons": details.open_reasons,
        "reasoning_sources": details.reasoning_sources,
        "finish_reasons": details.finish_reasons,
        "retries_by_reason": details.retries_by_reason,
        "latency_s": details.latency_s,
    }
    for group, figures in groups.items():
        rows += [{"group": group, "name": k, "value": v} for k, v in (figures or {}).items()]
    for url, timeline in details.concurrency_timeline.items():
        rows += [{"group": f"concurrency {url}", "name": f"t={t}s", "value": n} for t, n in timeline[-50:]]
    publish_table(rows, key="generate-table", description="generate: counts, reasons, sources, latency, concurrency")
