"""Runs sharing an endpoint's limit: never above it together, an even split while both have work,
every slot given back; a retry's backoff holds no slot."""

from __future__ import annotations

import itertools
import threading

import pytest

from eagle3_core.run.driver import StageRun, drive
from eagle3_core.stages.generate.stage import GenerateStage
from tests.stages.generate.helpers import Interrupting, config, prompts, write_jsonl


class MemoryLimits:
    """The core's ``SharedLimits`` in memory (the flow's Prefect one is tested in test_cli)."""

    def __init__(self, limit: int) -> None:
        self.size, self.used, self.leases, self.members = limit, 0, {}, set()
        self._ids, self._lock = itertools.count(), threading.Lock()

    def limit(self, url: str) -> int:
        return self.size

    def take(self, url: str, slots: int, lease_seconds: float):
        with self._lock:
            if self.used + slots > self.size:
                return None
            key = next(self._ids)
            self.leases[key], self.used = slots, self.used + slots
            return key

    def join(self, url: str, lease_seconds: float):
        with self._lock:
            key = next(self._ids)
            self.members.add(key)
            return key

    def runs(self, url: str) -> int:
        return len(self.members)

    def renew(self, lease, lease_seconds: float) -> bool:
        return lease in self.leases or lease in self.members

    def give_back(self, lease) -> None:
        with self._lock:
            self.members.discard(lease)
            self.used -= self.leases.pop(lease, 0)

    def starved(self, url: str, seconds: float) -> str:
        return f"starved on {url}"

    def close(self) -> None:
        pass


def peak_in_flight(log, prefixes: str) -> int:
    """The most chats of these runs the server held at once (each run's probe is outside the limit)."""
    events = sorted(
        [(start, 1) for p, start, _ in log if p[:1] in prefixes] + [(end, -1) for p, _, end in log if p[:1] in prefixes]
    )
    return max(itertools.accumulate(step for _, step in events))


def run_with(cfg, out, shared) -> GenerateStage:
    stage = GenerateStage(cfg, out)
    stage.shared = shared
    drive(stage)
    return stage


def test_two_runs_on_one_limit_never_exceed_it_and_split_it_evenly(tmp_path, make_fake_server):
    server = make_fake_server(delay=0.1)
    shared = MemoryLimits(8)
    runs = {}
    for name in "AB":
        cfg = config(write_jsonl(tmp_path / f"{name}.jsonl", prompts(300, prefix=name)), [server.url], concurrency=8)
        runs[name] = threading.Thread(target=run_with, args=(cfg, tmp_path / name, shared))
    runs["A"].start()
    while not any(p.startswith("A") for p, _, _ in server.log):
        threading.Event().wait(0.05)
    runs["B"].start()
    for thread in runs.values():
        thread.join()

    assert peak_in_flight(server.log, "AB") <= 8
    chats = sorted((start, p[0]) for p, start, _ in server.log if p[:1] in ("A", "B"))
    assert sum(1 for _, who in chats if who == "A") == sum(1 for _, who in chats if who == "B") == 300
    first_b = next(i for i, (_, who) in enumerate(chats) if who == "B")
    # from 1.5 s after B's first chat (the keepers' rebalancing) until one runs out: an even split
    joined = chats[first_b][0] + 1.5
    a_done = max(start for start, who in chats if who == "A")
    b_done = max(start for start, who in chats if who == "B")
    both = [who for start, who in chats if joined <= start <= min(a_done, b_done)]
    assert len(both) > 100, "the runs must overlap long enough to judge the split"
    assert 0.35 <= both.count("A") / len(both) <= 0.65
    assert shared.used == 0 and not shared.members  # every lease given back


def test_a_run_alone_takes_the_whole_limit(tmp_path, make_fake_server):
    server = make_fake_server(delay=0.1)
    shared = MemoryLimits(8)
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(80)), [server.url], concurrency=16)
    run = run_with(cfg, tmp_path / "out", shared)
    assert run.stats.outcomes["accepted"] == 80
    assert peak_in_flight(server.log, "Q") == 8 and shared.used == 0


def test_a_run_interrupted_mid_stream_gives_every_lease_back(tmp_path, fake_server):
    """Ctrl-C: asyncio cancels the keeper with every other task as its loop closes; the keeper still
    gives back what it holds, so the next run on the endpoint waits for no lease to lapse."""
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(60)), [fake_server.url], shard_rows=5)
    stage = GenerateStage(cfg, tmp_path / "out", Interrupting(after=20))
    stage.shared = shared = MemoryLimits(8)

    with pytest.raises(KeyboardInterrupt):
        drive(stage)

    assert stage.stats.done >= 20 and shared.used == 0 and not shared.members


def test_a_retry_waiting_out_its_backoff_holds_no_slot(tmp_path, fake_server, monkeypatch):
    from eagle3_core.endpoint.client import Requester

    monkeypatch.setattr(Requester, "wait_before", lambda self, attempt: 3.0)
    fake_server.inject("503", times=1, match="Q0")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(6)), [fake_server.url], concurrency=1)
    run = StageRun(GenerateStage(cfg, tmp_path / "out"))
    run.open()
    run.run(None)
    order = [p for p in fake_server.prompts() if p.startswith("Q")]
    assert order == ["Q0", "Q1", "Q2", "Q3", "Q4", "Q5", "Q0"]  # the one slot served the others meanwhile


def test_a_run_that_gets_no_slot_says_so_with_the_fix():
    import asyncio

    from eagle3_core.endpoint.concurrency import AimdController, Endpoint, EndpointPool
    from eagle3_core.endpoint.slots import SlotKeeper

    shared = MemoryLimits(4)
    shared.take("u", 4, 60.0)  # every slot held by a run that died where no server sweeps leases
    pool = EndpointPool([Endpoint("u", AimdController(4, 4))])
    lines: list[str] = []
    keeper = SlotKeeper(shared, pool, lease_seconds=60.0, has_unstarted=lambda: True, on_error=lines.append)

    async def starve() -> None:
        await keeper.start()
        assert lines == []
        keeper.holdings["u"].starved_since -= 91  # a lease period and half a minute later
        await keeper.step()

    asyncio.run(starve())
    assert lines == ["starved on u"] and pool.endpoints[0].granted == 0
