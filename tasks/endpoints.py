"""Serving endpoints shared between runs: a Prefect global concurrency limit each, held in leases.

Each endpoint's capacity is a global concurrency limit named after it (``vllm:{host}:{port}``),
shared by every run that sends to it. Any stage that states its endpoints (``Stage.endpoints()``:
generate's served source) is given ``PrefectLimits`` by its tasks (``tasks/stage.py``), which lets
the core hold slots of each limit in leased chunks (``eagle3_core/endpoint/slots.py``), so two runs
split a server instead of doubling its queue, and a killed run's slots come back when its leases
lapse: the API's sweep gives them back (``prefect server``'s repossessor; on the command's own
ephemeral API, ``tasks/ephemeral_api.py``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tasks.common import ensure_limit

if TYPE_CHECKING:
    from eagle3_core.run.driver import Stage

RUNS_LIMIT = 1_000_000  # the ``:runs`` counter bounds nothing: it only counts the runs with work


def endpoint_limit_name(url: str) -> str:
    """The global concurrency limit of one serving endpoint: ``vllm:{host}:{port}``."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"vllm:{parts.hostname}:{port}"


def ensure_limits(endpoints: dict[str, int]) -> None:
    """Each endpoint's limit, created where missing with its slots (and its ``:runs`` counter); an
    operator's existing value is kept."""
    for url, slots in sorted(endpoints.items()):
        name = endpoint_limit_name(url)
        ensure_limit(name, slots)
        ensure_limit(f"{name}:runs", RUNS_LIMIT)


def share_endpoints(stage: Stage) -> None:
    """A stage that sends to serving endpoints (``stage.endpoints()``, any stage) gets its share of
    each one's limit as its ``shared``, created where missing at the most the run keeps in flight
    there; the driver's close closes it. A stage that sends nothing (generate's ``source: dataset``)
    creates no limit."""
    endpoints = stage.endpoints()
    if endpoints:
        ensure_limits(endpoints)
        stage.shared = PrefectLimits(list(endpoints), stage.name)


class PrefectLimits:
    """The core's ``SharedLimits`` on Prefect global concurrency limits with leases."""

    def __init__(self, urls: list[str], stage: str) -> None:
        from prefect.client.schemas.objects import ConcurrencyLeaseHolder
        from prefect.runtime import flow_run

        self.stage = stage  # who waits, in the starved line
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
            f"{self.stage}: no slot of {name} free for {seconds:.0f} s: other runs hold all of them, or a killed "
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
