"""The async loop: keep every endpoint full, turn each answer into a record, write it.

One loop streams the whole input: there are no batches, so nothing waits for a straggler. Work
items are pulled from the (lazy) planner only when there is room: at most twice the pool's
capacity are sending or waiting for a slot, so memory holds a window of prompts, never the
dataset. A prompt waiting to retry leaves the window (and holds no slot) while it sleeps, so a
new prompt takes its place; it comes back without waiting for room. Rows go into shards as they
finish (``RowShardWriter``), written off the loop. A row's failure (a 400, retries run out) becomes
a rejected record, final or open by its reason (``endpoint.health.is_open``); a failure to write (a full
disk), an outage (every endpoint down for ``outage_seconds``), endpoints that all refuse, or a
failure every request shares (``endpoint.health.SharedFailure``: distinct prompts' first answers, never
their retries) stops the run, after cancelling what is in flight: a prompt cut off so has no row
and stays open. Final rejects that match the current shared-failure streak are held
back until the streak breaks, so a streak that turns out to be a setting leaves none of them
final. With a ``SlotKeeper`` (runs sharing an endpoint's limit), the keeper's loop runs beside
the requests and the endpoints' bounds follow the slots it holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from eagle3_core.chat.rows import Messages, row_json
from eagle3_core.contracts import generations
from eagle3_core.endpoint.client import Answer, Requester, RequestFailed, check_overdue, close_clients, open_clients
from eagle3_core.endpoint.concurrency import EndpointPool
from eagle3_core.endpoint.health import Outage, is_open, refused_everywhere
from eagle3_core.endpoint.slots import SlotKeeper
from eagle3_core.errors import StageError
from eagle3_core.stages.generate.shards import RowShardWriter
from eagle3_core.stages.generate.stats import RunStats
from eagle3_core.stages.generate.turns import Conversation, answer_turns


@dataclass(frozen=True)
class WorkItem:
    row_index: int
    sample_id: str
    messages: Messages
    row: Any
    tools: list[dict] | None = None
    conversation: Conversation | None = None  # generate.turns: all (turns.py)


class Window:
    """How many prompts may be sending or waiting for a slot at once (a bound on memory)."""

    def __init__(self, size: int) -> None:
        self.size, self.active = size, 0
        self._room = asyncio.Event()

    async def enter(self) -> None:
        while self.active >= self.size:
            self._room.clear()
            await self._room.wait()
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        self._room.set()

    async def sleep_outside(self, seconds: float) -> None:
        """A retry's backoff: its place goes to a new prompt meanwhile; it comes back at once."""
        self.leave()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.active += 1


class Engine:
    def __init__(
        self,
        requester: Requester,
        pool: EndpointPool,
        accepted: RowShardWriter,
        rejected: RowShardWriter,
        stats: RunStats,
        model: str,
        on_progress: Callable[[], None],
        on_shard: Callable[[str, str, int], None] = lambda kind, name, rows: None,
        turns: RowShardWriter | None = None,
    ) -> None:
        self.requester, self.pool, self.stats, self.model = requester, pool, stats, model
        self.accepted, self.rejected, self.on_progress, self.on_shard = accepted, rejected, on_progress, on_shard
        self.turns = turns  # the earlier turns of generate.turns: all
        self.unstarted = True  # the planner has prompts left
        self.held: list[dict[str, Any]] = []  # final rejects of the current shared-failure streak
        self.held_signature: tuple[str, str] | None = None
        self.probes: set[asyncio.Task] = set()  # half-open probes in flight (the run's end never waits on one)

    async def process(self, items: Iterable[WorkItem], keeper: SlotKeeper | None = None) -> None:
        self._main, self._stop, self._closing = asyncio.current_task(), None, False
        for endpoint in self.pool.endpoints:
            open_clients(endpoint, self.requester.cfg)
        window = Window(2 * self.pool.capacity)
        self.requester.backoff = window.sleep_outside
        self.requester.stop = lambda why: self._fail(shared_error(why))
        alive: set[asyncio.Task] = set()

        def finished(task: asyncio.Task) -> None:
            alive.discard(task)
            window.leave()
            if not task.cancelled() and task.exception() is not None:
                self._fail(task.exception())

        helpers = [asyncio.create_task(self._flush_on_time()), asyncio.create_task(self._watch_health())]
        keeping = None
        try:
            if keeper is not None:
                await keeper.start()
                keeping = asyncio.create_task(keeper.run())
            for item in items:
                await window.enter()
                task = asyncio.create_task(self._one(item))
                alive.add(task)
                task.add_done_callback(finished)
            self.unstarted = False
            await asyncio.gather(*alive, return_exceptions=True)  # a failure arrives through _fail
            await self._settle_held()
        except asyncio.CancelledError:
            if self._stop is not None:  # stopped by _fail: say why, not "cancelled"
                raise self._stop from None
            raise
        finally:
            await self._close(list(alive) + helpers + list(self.probes), keeper, keeping)

    async def _close(self, tasks: list[asyncio.Task], keeper: SlotKeeper | None, keeping: asyncio.Task | None) -> None:
        self._closing, self.unstarted = True, False
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if keeping is not None:  # after the requests: every slot is free to give back
            keeper.stop()
            await keeping
        for endpoint in self.pool.endpoints:
            await close_clients(endpoint)

    def _fail(self, exc: BaseException) -> None:
        """Stop the run with ``exc`` now, wherever ``process`` waits (a window place, the last
        answers): a request task's bug, a full disk, an outage. The first error wins."""
        if self._stop is None and not self._closing:
            self._stop = exc
            self._main.cancel()

    async def _watch_health(self) -> None:
        """Stop the run once every endpoint is down for ``outage_seconds`` (every prompt started
        meanwhile would only wait), or all refuse every request; each tick, count overdue requests
        toward their endpoint's breaker, send a breaker whose backoff ended its half-open probe,
        and wake the waiters (a probe that closed a breaker frees its slots)."""
        cfg = self.requester.cfg
        breakers = {e.url: e.breaker for e in self.pool.endpoints}
        outage = Outage(breakers, cfg.outage_seconds)
        tick = min(0.25, cfg.outage_seconds / 4)
        while True:
            await asyncio.sleep(tick)
            if why := refused_everywhere(breakers):
                return self._fail(shared_error(why))
            if why := outage.why():
                return self._fail(outage_error(why))
            now = time.monotonic()
            for endpoint in self.pool.endpoints:
                if hung := check_overdue(endpoint, cfg, now):
                    self.requester.warn_once(endpoint.url, "overdue", f"{hung}; its prompts go to the other endpoints")
                if endpoint.breaker.probe_due():
                    probe = asyncio.create_task(self.requester.probe(endpoint))
                    self.probes.add(probe)
                    probe.add_done_callback(self.probes.discard)
            await self.pool.bounds_changed()

    async def _one(self, item: WorkItem) -> None:
        try:
            answer, item = await self._answer(item)
        except RequestFailed as failure:
            self.stats.requests += failure.attempts
            if self._stop is not None:
                return  # the run is stopping: this prompt stays open, resent by the next run
            record = generations.rejected_row(
                item.sample_id, item.row_index, row_json(item.row), failure.reason, failure.detail
            )
            if not is_open(failure.reason) and self.requester.shared.signature == (failure.reason, failure.last):
                self.held.append(record)
                self.held_signature = (failure.reason, failure.last)
            else:
                await self._store_reject(record)
        else:
            self.stats.requests += answer.attempts
            record = accepted_record(item, answer, self.model)
            self.stats.accept(record)
            await self._store(self.accepted, record)
        await self._release_held()
        self.on_progress()

    async def _answer(self, item: WorkItem) -> tuple[Answer, WorkItem]:
        """The item's answer; a conversation's last turn, each earlier one answered and stored
        first, with the item's messages now the history the target wrote."""
        if item.conversation is None:
            return await self.requester.answer(item.messages, item.tools), item
        ask = lambda messages: self.requester.answer(messages, item.tools)  # noqa: E731
        answer, messages = await answer_turns(item.conversation, ask, self._store_turn(item))
        return answer, replace(item, messages=messages)

    def _store_turn(self, item: WorkItem) -> Callable:
        async def store(conversation: Conversation, turn: int, messages: Messages, answer: Answer) -> None:
            self.stats.requests += answer.attempts
            self.stats.turns += 1
            record = accepted_record(replace(item, messages=messages), answer, self.model)
            await self._store(self.turns, generations.turn_row(record, item.sample_id, turn))

        return store

    async def _store_reject(self, record: dict[str, Any]) -> None:
        self.stats.reject(record["reason"])
        await self._store(self.rejected, record)

    async def _release_held(self) -> None:
        """The streak broke (an answer, another failure): its held rejects were the prompts' own."""
        if self.held and self.requester.shared.signature != self.held_signature:
            held, self.held = self.held, []
            for record in held:
                await self._store_reject(record)

    async def _settle_held(self) -> None:
        """At the end of the input: a streak that is every prompt of the run, where no row of it
        was ever accepted (this run or an earlier one here), is a setting, not the prompts (a run
        shorter than ``shared_failure_attempts``); else the held rows are final."""
        if self.held and self.requester.shared.every_answer() and not self.stats.outcomes["accepted"]:
            raise shared_error(self.requester.shared.error())
        held, self.held = self.held, []
        for record in held:
            await self._store_reject(record)

    async def _store(self, writer: RowShardWriter, record: dict[str, Any]) -> None:
        if writer.add(record):
            await self._flush(writer)

    async def _flush(self, writer: RowShardWriter) -> None:
        """Write the buffer in a thread (polars releases the GIL): a 1,000-row shard of 1,000-token
        answers took 75-100 ms to build and write here, a stall of every request in flight."""
        taken = writer.take()
        if taken is not None:
            await asyncio.to_thread(writer.write, *taken)
            self.on_shard(writer.kind, taken[0].name, len(taken[1]))

    async def _flush_on_time(self) -> None:
        interval = min(1.0, self.accepted.flush_seconds)
        while True:
            await asyncio.sleep(interval)
            try:
                for writer in (self.accepted, self.rejected, self.turns):
                    if writer is not None and writer.due():
                        await self._flush(writer)
            except Exception as exc:  # a full disk
                self._fail(exc)
                return


def outage_error(why: str) -> StageError:
    return StageError(
        f"the endpoints are down: {why}; what finished is kept, and the rerun sends every prompt left open"
    )


def shared_error(why: str) -> StageError:
    """One line with the server's own words: a setting, a key or a gateway, not the prompts."""
    return StageError(f"{why}; no prompt is settled by it: fix the setting and rerun, which sends them")


def accepted_record(item: WorkItem, answer: Answer, model: str) -> dict[str, Any]:
    """The served answer as an accepted row (``generations.accepted_row``)."""
    c = answer.completion
    return generations.accepted_row(
        sample_id=item.sample_id,
        messages=item.messages,
        reasoning=c.reasoning,
        content=c.content,
        reasoning_source=c.reasoning_source,
        finish_reason=c.finish_reason,
        model=model,
        endpoint=answer.endpoint,
        prompt_token_ids=c.prompt_token_ids,
        completion_token_ids=c.completion_token_ids,
        prompt_tokens=c.prompt_tokens,
        completion_tokens=c.completion_tokens,
        attempts=answer.attempts,
        latency_s=answer.latency_s,
        tools=item.tools,
        tool_calls=c.tool_calls,
    )
