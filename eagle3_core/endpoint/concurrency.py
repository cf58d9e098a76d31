"""How many requests each endpoint may have in flight, and which endpoint takes the next one.

vLLM answers no 429 when saturated: it queues, latency grows, requests time out. With
``concurrency: auto`` each endpoint's limit follows AIMD, as TCP does:
- slow start: +1 per success until the first decrease (reaches 128 in about 7 round trips);
- then additive increase: +1 per ``limit`` successes (one per round trip);
- multiplicative decrease: x0.5 on a timeout, or when the smoothed latency exceeds
  ``latency_factor`` x the best latency seen, at most once per smoothed round trip (one
  overload episode must not halve the limit once per in-flight request);
- always within [1, max_concurrency].
A fixed ``concurrency`` is the same controller that never moves.

``EndpointPool.acquire`` gives the next request to the endpoint with the lowest in-flight/limit
ratio (least loaded) among those whose breaker admits it (``health.Breaker``: a dead endpoint
fails at once and so never looks busy; least-loaded alone kept choosing it); it waits when every
endpoint is full or down. Where runs share an endpoint, its
bound is also the slots this run holds of the shared limit (``granted``, kept by ``slots.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from eagle3_core.endpoint.health import Breaker

RECENT_ANSWERS = 64  # the latencies an endpoint's overdue bound is judged on
TIMELINE_POINTS = 500  # enough to plot; a long run is decimated to stay this small


class AimdController:
    def __init__(self, fixed: int | None, max_concurrency: int, latency_factor: float = 2.0) -> None:
        self.auto = fixed is None
        self.max = max_concurrency if self.auto else fixed
        self.limit = float(min(4, self.max) if self.auto else fixed)
        self.latency_factor = latency_factor
        self.slow_start = True
        self.best_latency: float | None = None
        self.smoothed: float | None = None
        self._last_decrease = 0.0
        self._t0 = time.monotonic()
        self.timeline: list[tuple[float, int]] = [(0.0, int(self.limit))]

    def bound(self, most: int) -> None:
        self.max = max(1, min(self.max, most))
        self.limit = min(self.limit, float(self.max))

    @property
    def slots(self) -> int:
        return int(self.limit)

    def on_success(self, latency: float) -> None:
        self.best_latency = latency if self.best_latency is None else min(self.best_latency, latency)
        self.smoothed = latency if self.smoothed is None else 0.9 * self.smoothed + 0.1 * latency
        if not self.auto:
            return
        if self.smoothed > self.latency_factor * self.best_latency:
            self._decrease()
        else:
            self._set(self.limit + (1.0 if self.slow_start else 1.0 / self.limit))

    def on_timeout(self) -> None:
        if self.auto:
            self._decrease()

    def _decrease(self) -> None:
        now = time.monotonic()
        if now - self._last_decrease < max(self.smoothed or 0.0, 0.05):
            return
        self._last_decrease, self.slow_start = now, False
        self._set(self.limit * 0.5)
        self.smoothed = self.best_latency  # judge the new limit on fresh latencies

    def _set(self, value: float) -> None:
        before = int(self.limit)
        self.limit = min(float(self.max), max(1.0, value))
        if int(self.limit) != before:
            self.timeline.append((round(time.monotonic() - self._t0, 3), int(self.limit)))
            if len(self.timeline) > TIMELINE_POINTS:
                self.timeline = self.timeline[::2]


def controller_for(cfg) -> AimdController:
    """The in-flight controller a ``RequestConfig`` asks for: fixed, or AIMD under ``auto``."""
    fixed = None if cfg.concurrency == "auto" else cfg.concurrency
    return AimdController(fixed, cfg.max_concurrency, cfg.aimd_latency_factor)


@dataclass
class Endpoint:
    url: str
    controller: AimdController
    in_flight: int = 0
    requests: int = 0
    granted: int | None = None  # slots held of a limit shared with other runs; None: not shared
    clients: list = field(default_factory=list, repr=False)  # AsyncOpenAI clients, bound to one event loop
    client_load: list[int] = field(default_factory=list, repr=False)  # in-flight requests per client
    breaker: Breaker = field(default_factory=lambda: Breaker(5, 1.0, 30.0))
    attempts: dict = field(default_factory=dict, repr=False)  # task with an attempt in flight here -> its start
    moving: set = field(default_factory=set, repr=False)  # of those, cancelled as its breaker opened
    overdue: set = field(default_factory=set, repr=False)  # of those, counted overdue (health.overdue_after)
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT_ANSWERS), repr=False)  # latencies, s
    last_answer_at: float = field(default_factory=time.monotonic)  # the server's last answer (any status)
    model_names: frozenset = frozenset()  # the names this endpoint answers the requested model under

    @property
    def label(self) -> str:
        return self.url

    @property
    def bound(self) -> int:
        """The most requests this run may have in flight here now."""
        slots = self.controller.slots
        return slots if self.granted is None else min(slots, self.granted)


class EndpointPool:
    """Least-loaded choice among endpoints, each bounded by its controller's limit."""

    def __init__(self, endpoints: list[Endpoint]) -> None:
        self.endpoints = endpoints
        self._changed: asyncio.Condition | None = None
        self.waiting = 0  # requests waiting for a slot (demand beyond what is in flight)

    @property
    def in_flight(self) -> int:
        return sum(e.in_flight for e in self.endpoints)

    @property
    def capacity(self) -> int:
        """The most requests the pool can ever hold in flight (bounds the work queued ahead)."""
        return sum(e.controller.max for e in self.endpoints)

    def _free(self) -> Endpoint | None:
        free = [e for e in self.endpoints if e.in_flight < e.bound and e.breaker.admits()]
        return min(free, key=lambda e: e.in_flight / e.bound) if free else None

    async def acquire(self) -> Endpoint:
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            self.waiting += 1
            try:
                # no timed wait here: asyncio.wait_for (3.11) can swallow a cancel, and a run stopping
                # would then wait forever; the engine's health watcher wakes waiters every tick instead,
                # so a breaker whose backoff ended gets its probe
                endpoint = await self._changed.wait_for(self._free)
            finally:
                self.waiting -= 1
            endpoint.in_flight += 1
            endpoint.requests += 1
            return endpoint

    async def release(self, endpoint: Endpoint) -> None:
        assert self._changed is not None
        async with self._changed:
            endpoint.in_flight -= 1
            self._changed.notify_all() if endpoint.controller.auto else self._changed.notify(1)

    async def bounds_changed(self) -> None:
        """Wake every waiter: a bound grew (slots granted) or a breaker's backoff ended, so a
        request may fit now."""
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()
