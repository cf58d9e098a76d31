"""Two `eagle3 generate` runs on one endpoint through one real `prefect server`: together they
never exceed the endpoint's limit, they split it evenly while both have work, and the slots of a
run killed with SIGKILL come back when its leases lapse.

`prefect server start` (not the test API: Prefect's ephemeral server runs no lease sweep; the
command's own sweeps its, test_cli's kill test), with its
sweep every 2 s instead of 15 so the test waits for the lease (60 s, Prefect's minimum), not
for the sweep.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.fixtures.prefect_server import running_prefect_server
from tests.stages.generate.helpers import prompts, write_jsonl
from tests.stages.generate.test_cli import generate_args

pytestmark = [pytest.mark.slow, pytest.mark.prefect_server]

LIMIT = 8


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """A real server whose repossessor reclaims lapsed slot leases every 2 s; no scheduler."""
    with running_prefect_server(
        tmp_path_factory.mktemp("prefect-home"),
        PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS="2",
        PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED="false",
    ) as env:
        yield env


def generate(env: dict, src: Path, url: str, out: Path, **popen) -> subprocess.Popen:
    args = generate_args(src, url, out, "--concurrency", str(LIMIT), "--flush-seconds", "0.5")
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **popen)


def active_slots(env: dict, name: str) -> int:
    with httpx.Client(base_url=env["PREFECT_API_URL"]) as client:
        return client.get(f"/v2/concurrency_limits/{name}").json()["active_slots"]


def peak_in_flight(log, prefixes: str) -> int:
    events = sorted(
        [(start, 1) for p, start, _ in log if p[:1] in prefixes] + [(end, -1) for p, _, end in log if p[:1] in prefixes]
    )
    return max(itertools.accumulate(step for _, step in events))


def test_two_runs_share_the_endpoint_limit_evenly_and_never_exceed_it(tmp_path, make_fake_server, prefect_server):
    server = make_fake_server(delay=0.2)
    runs = [
        generate(
            prefect_server,
            write_jsonl(tmp_path / f"{name}.jsonl", prompts(500, prefix=name)),
            server.url,
            tmp_path / name,
        )
        for name in "AB"
    ]
    for run in runs:
        assert run.wait(timeout=600) == 0, run.stderr.read()

    chats = sorted((start, p[0]) for p, start, _ in server.log if p[:1] in ("A", "B"))
    assert len(chats) == 1000 and peak_in_flight(server.log, "AB") <= LIMIT
    both_from = max(min(s for s, who in chats if who == name) for name in "AB") + 3.0  # after the rebalancing
    both_to = min(max(s for s, who in chats if who == name) for name in "AB")
    both = [who for start, who in chats if both_from <= start <= both_to]
    assert len(both) > 200, "the runs must overlap long enough to judge the split"
    assert 0.35 <= both.count("A") / len(both) <= 0.65
    from tasks.endpoints import endpoint_limit_name

    assert active_slots(prefect_server, endpoint_limit_name(server.url)) == 0  # every lease given back


def test_a_killed_runs_slots_come_back_when_its_leases_lapse(tmp_path, make_fake_server, prefect_server):
    from tasks.endpoints import endpoint_limit_name

    server = make_fake_server(delay=0.2)
    name = endpoint_limit_name(server.url)
    run = generate(prefect_server, write_jsonl(tmp_path / "in.jsonl", prompts(5000)), server.url, tmp_path / "out")
    wait_for(lambda: len(server.log) > 50 or run.poll() is not None, 300, "the run's first answers")
    assert run.poll() is None, run.stderr.read()
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert active_slots(prefect_server, name) == LIMIT  # still leased by the dead run
    # back within the lease (60 s) and a sweep (2 s here), with this box's slack
    wait_for(lambda: active_slots(prefect_server, name) == 0, 60 + 2 + 40, "the lapsed leases' slots")
    assert active_slots(prefect_server, f"{name}:runs") == 0
