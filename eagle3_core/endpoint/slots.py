"""Slots of an endpoint's limit shared by every run that sends to it, taken in chunks with leases.

Several runs (flows on several machines) may send to one server; its limit (in the flow, Prefect's
global concurrency limit ``vllm:{host}:{port}``) bounds them together. One API call per request
would cost 128 calls/s at the seeds' scale, so a run holds slots in chunks of ``limit / 16``
(rounded up), each under its own lease, renewed every half lease while held:

- a run takes chunks up to what it can use (its in-flight bound), capped at its fair share:
  ``limit / runs``, where ``runs`` counts the runs that still have prompts not yet started (each
  holds one slot of a second limit, ``{name}:runs``, while it has);
- it gives a chunk back as soon as it holds a whole chunk more than that: it lowers its own bound
  first, then returns the lease once its in-flight requests fit under it, so no request is cut;
- a run killed with SIGKILL renews nothing: its leases lapse and the server's sweep takes the slots
  back (``prefect server``'s repossessor, or the CLI's ephemeral API's, ``tasks/ephemeral_api.py``).

A run alone on an endpoint takes the whole limit once and keeps it; two runs with work split it
evenly (the one that was first gives back chunks until both hold ``limit / 2``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

from eagle3_core.endpoint.concurrency import Endpoint, EndpointPool

CHUNKS_PER_LIMIT = 16  # 16 leases per endpoint: a renewal every ~2 s at a 60 s lease, and a share within 1/16


class SharedLimits(Protocol):
    """A store of limits shared between runs (the flow passes Prefect's). Calls block; the keeper
    makes them from a worker thread."""

    def limit(self, url: str) -> int:
        """The endpoint's limit: the most requests all runs together may have in flight."""

    def take(self, url: str, slots: int, lease_seconds: float) -> Hashable | None:
        """A lease on ``slots`` slots, or None when the limit has fewer free."""

    def join(self, url: str, lease_seconds: float) -> Hashable:
        """A lease that counts this run among the runs with work left on ``url``."""

    def runs(self, url: str) -> int:
        """How many runs hold a ``join`` lease on ``url`` now."""

    def renew(self, lease: Hashable, lease_seconds: float) -> bool:
        """Extend a lease; False when the server no longer has it (it lapsed)."""

    def give_back(self, lease: Hashable) -> None: ...

    def starved(self, url: str, seconds: float) -> str:
        """One line for a run that has held no slot of ``url``'s limit for ``seconds``, with the fix."""

    def close(self) -> None:
        """Let go of what it holds open (an API client); called once the run's unit is over."""


@dataclass
class Lease:
    key: Hashable
    slots: int
    renewed: float = field(default_factory=time.monotonic)


@dataclass
class Holding:
    """What this run holds on one endpoint."""

    limit: int
    chunk: int
    leases: list[Lease] = field(default_factory=list)
    draining: list[Lease] = field(default_factory=list)  # given back once in-flight fits without them
    member: Lease | None = None
    runs: int = 1
    runs_read: float = 0.0
    starved_since: float | None = None  # when this run last held no slot while it had work

    @property
    def granted(self) -> int:
        return sum(lease.slots for lease in self.leases)


class SlotKeeper:
    """Keeps each endpoint's ``granted`` near this run's fair share of the shared limit."""

    def __init__(
        self,
        shared: SharedLimits,
        pool: EndpointPool,
        lease_seconds: float,
        has_unstarted: Callable[[], bool],
        on_error: Callable[[str], None] = lambda line: None,
        tick: float = 0.5,
        runs_every: float = 2.0,
    ) -> None:
        self.shared, self.pool, self.lease_seconds = shared, pool, lease_seconds
        self.has_unstarted, self.on_error = has_unstarted, on_error
        self.tick, self.runs_every = tick, runs_every
        self.holdings: dict[str, Holding] = {}

    async def start(self) -> None:
        """Read each limit and take the first slots (before the first request); on failure give
        back what was taken, then raise."""
        self._stop = asyncio.Event()
        try:
            for endpoint in self.pool.endpoints:
                limit = await self._call(self.shared.limit, endpoint.url)
                self.holdings[endpoint.url] = Holding(limit, max(1, -(-limit // CHUNKS_PER_LIMIT)))
                endpoint.controller.bound(limit)
                endpoint.granted = 0
            await self.step()
        except BaseException:
            await self.release_all()
            raise

    async def run(self) -> None:
        """Adjust every ``tick`` seconds until ``stop``; then give every lease back. Stopped, not
        cancelled: a ``take`` cut off mid-call would still be granted, and its lease lost. Cancelled
        all the same (Ctrl-C: asyncio cancels every task as its loop closes), it still gives back
        every lease it holds, so no other run waits for them to lapse."""
        try:
            while not self._stop.is_set():
                try:
                    await asyncio.wait_for(self._stop.wait(), self.tick)
                except TimeoutError:
                    pass
                if self._stop.is_set():
                    break
                try:
                    await self.step()
                except Exception as exc:  # the API blinked: keep what we hold, try again next tick
                    self.on_error(f"generate: shared limit not adjusted ({type(exc).__name__}: {exc})")
        finally:
            await self.release_all()

    def stop(self) -> None:
        self._stop.set()

    async def step(self) -> None:
        for endpoint in self.pool.endpoints:
            await self._adjust(endpoint, self.holdings[endpoint.url])
        await self.pool.bounds_changed()

    async def release_all(self) -> None:
        for endpoint in self.pool.endpoints:
            holding = self.holdings.get(endpoint.url)
            if holding is None:
                continue
            for lease in holding.leases + holding.draining + ([holding.member] if holding.member else []):
                try:
                    await self._call(self.shared.give_back, lease.key)
                except Exception:  # the lease lapses on its own
                    pass
            holding.leases, holding.draining, holding.member = [], [], None
            endpoint.granted = 0

    # ---- one endpoint ----------------------------------------------------------------------

    async def _adjust(self, endpoint: Endpoint, holding: Holding) -> None:
        await self._membership(endpoint, holding)
        target = self._target(endpoint, holding)
        while holding.granted < target:
            key = await self._call(self.shared.take, endpoint.url, holding.chunk, self.lease_seconds)
            if key is None:
                break  # the limit is full: other runs hold the rest
            holding.leases.append(Lease(key, holding.chunk))
        while holding.leases and holding.granted - holding.leases[-1].slots >= target:
            holding.draining.append(holding.leases.pop())
        endpoint.granted = holding.granted
        self._warn_when_starved(endpoint, holding, target)
        if holding.draining and endpoint.in_flight <= endpoint.granted:
            for lease in holding.draining:
                await self._call(self.shared.give_back, lease.key)
            holding.draining = []
        await self._renew(holding)
        endpoint.granted = holding.granted

    def _warn_when_starved(self, endpoint: Endpoint, holding: Holding, target: int) -> None:
        """Say so, once a lease period, when the run gets no slot at all: held by other runs, or
        by a killed run whose leases no server sweeps (an API without Prefect's repossessor; the
        CLI's own ephemeral API sweeps them, ``tasks/ephemeral_api.py``)."""
        now = time.monotonic()
        if holding.granted or not target:
            holding.starved_since = None
        elif holding.starved_since is None:
            holding.starved_since = now
        elif now - holding.starved_since >= self.lease_seconds + 30:
            self.on_error(self.shared.starved(endpoint.url, now - holding.starved_since))
            holding.starved_since = now - 30  # again after one more lease period

    async def _membership(self, endpoint: Endpoint, holding: Holding) -> None:
        wants = self.has_unstarted()
        if wants and holding.member is None:
            holding.member = Lease(await self._call(self.shared.join, endpoint.url, self.lease_seconds), 1)
            holding.runs_read = 0.0
        elif not wants and holding.member is not None:
            await self._call(self.shared.give_back, holding.member.key)
            holding.member = None
        now = time.monotonic()
        if now - holding.runs_read >= self.runs_every:
            holding.runs, holding.runs_read = await self._call(self.shared.runs, endpoint.url), now

    def _target(self, endpoint: Endpoint, holding: Holding) -> int:
        """Slots this run should hold: what it can use now, within its fair share."""
        if self.has_unstarted():
            need = endpoint.controller.slots
            share = -(-holding.limit // max(1, holding.runs))
        else:  # the tail: only retries and what is in flight; others with work come first
            need = min(endpoint.controller.slots, endpoint.in_flight + self.pool.waiting)
            share = -(-holding.limit // (holding.runs + 1))
        return min(need, share, holding.limit)

    async def _renew(self, holding: Holding) -> None:
        now = time.monotonic()
        for lease in holding.leases + holding.draining + ([holding.member] if holding.member else []):
            if now - lease.renewed < self.lease_seconds / 2:
                continue
            if await self._call(self.shared.renew, lease.key, self.lease_seconds):
                lease.renewed = now
            else:  # lapsed (this process stalled past the lease): the slots are no longer ours
                self._forget(holding, lease)

    @staticmethod
    def _forget(holding: Holding, lease: Lease) -> None:
        if lease is holding.member:
            holding.member = None
        for leases in (holding.leases, holding.draining):
            if lease in leases:
                leases.remove(lease)

    @staticmethod
    async def _call(fn, *args):
        return await asyncio.to_thread(fn, *args)
