"""Endpoint health, one endpoint at a time: a dead endpoint's work moves to the healthy ones, an
outage of every endpoint stops the run, and whatever a server failed stays open for the rerun."""

import pytest

from eagle3_core.endpoint.health import REASONS, Breaker, Outage, is_open, refused_everywhere
from eagle3_core.errors import StageError
from eagle3_core.ports import free_port
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import Recorder, accepted, config, prompts, rejected, write_jsonl


def settled_once(out, n: int) -> bool:
    rows = accepted(out)
    return len(rows) == n and rows["sample_id"].n_unique() == n


def test_one_of_two_endpoints_dies_mid_run_and_every_prompt_is_accepted_in_the_same_run(tmp_path, make_fake_server):
    dying, healthy = make_fake_server(), make_fake_server()
    dying.die_after(40)  # as a SIGKILLed vLLM: refused connections, reset keep-alives
    src = write_jsonl(tmp_path / "in.jsonl", prompts(300))

    manifest = run_generate(config(src, [dying.url, healthy.url]), tmp_path / "out")

    assert manifest.status == "complete" and dying.dead
    assert manifest.counts["accepted"] == 300 and manifest.counts["open"] == 0 and manifest.counts["rejected"] == 0
    assert settled_once(tmp_path / "out", 300) and len(rejected(tmp_path / "out")) == 0
    assert manifest.details["breaker_opened"][dying.url] >= 1 and manifest.details["breaker_opened"][healthy.url] == 0
    assert manifest.details["endpoint_states"][healthy.url] == "up"
    assert manifest.details["endpoint_states"][dying.url].startswith(("open", "half-open"))


def test_an_endpoint_down_at_the_start_is_left_out_with_a_warning_while_another_answers(tmp_path, fake_server):
    nothing = f"http://127.0.0.1:{free_port()}/v1"  # no server listens there
    recorder = Recorder()
    src = write_jsonl(tmp_path / "in.jsonl", prompts(20))

    manifest = run_generate(config(src, [nothing, fake_server.url]), tmp_path / "out", recorder)

    assert manifest.status == "complete" and manifest.counts["accepted"] == 20
    assert [line for line in recorder.lines if line.startswith(f"generate: warning: {nothing} is left out")]
    assert nothing in manifest.details["endpoints_down_at_start"]
    shown = recorder.updates[-1][2]["endpoints"]  # the progress artifact's description
    assert f"{fake_server.url} up" in shown and f"{nothing} " in shown and f"{nothing} up" not in shown


def test_an_outage_of_every_endpoint_stops_the_run_and_the_rerun_sends_every_prompt_left_open(fake_server, tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(200))
    cfg = config(src, [fake_server.url], concurrency=4, max_retries=1, outage_seconds=0.5, breaker_backoff=0.2)
    fake_server.inject("503", times=None, after=1)  # every chat after the start's probe: the server went down

    with pytest.raises(StageError, match="^the endpoints are down: every endpoint has been down for") as err:
        run_generate(cfg, tmp_path / "out")

    assert "HTTP 503" in str(err.value) and "the rerun sends every prompt left open" in str(err.value)
    first = read_manifest(tmp_path / "out")
    assert first.status == "failed" and first.counts["rejected"] == 0  # nothing final: the server failed
    assert first.counts["open"] == first.counts["input"] - first.counts["accepted"] > 0

    fake_server.clear_faults()  # the server is back
    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.status == "complete" and manifest.counts["open"] == 0
    assert manifest.counts["accepted"] == 200 and manifest.counts["rejected"] == 0
    assert settled_once(tmp_path / "out", 200) and len(rejected(tmp_path / "out")) == 0


def test_a_prompt_the_server_fails_while_the_others_answer_is_left_open_and_the_rerun_sends_it(fake_server, tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(10))
    fake_server.inject("503", times=None, match="Q3")
    cfg = config(src, [fake_server.url], outage_seconds=0.05)

    with pytest.raises(StageError, match=r"^1 prompt is still open \(http_503: 1\)"):
        run_generate(cfg, tmp_path / "out")

    first = read_manifest(tmp_path / "out")
    assert first.status == "failed" and first.counts["accepted"] == 9
    assert first.counts["open"] == 1 and first.counts["rejected"] == 0
    assert first.details["open_reasons"] == {"http_503": 1} and first.details["reject_reasons"] == {}

    fake_server.clear_faults()
    manifest = run_generate(cfg, tmp_path / "out")
    assert manifest.status == "complete" and manifest.counts["accepted"] == 10 and manifest.counts["open"] == 0
    assert fake_server.prompts().count("Q0") == 1  # the rerun sent only what was open
    assert settled_once(tmp_path / "out", 10) and len(rejected(tmp_path / "out")) == 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_breaker_opens_on_failures_in_a_row_and_a_half_open_probe_lets_the_endpoint_back():
    """The half-open probe is the engine's own short request: while it is out no user's prompt goes there."""
    clock = Clock()
    breaker = Breaker(failures=3, backoff=10, max_backoff=25, clock=clock)
    assert breaker.failed("connection", "refused") is False and breaker.failed("timeout", "slow") is False
    breaker.answered()  # an answer between failures: not in a row
    assert [breaker.failed("connection", "refused") for _ in range(3)] == [False, False, True]
    assert breaker.state == "open" and not breaker.admits()
    assert breaker.failed("connection", "in flight when it opened") is True  # the endpoint's, not the prompt's

    clock.now = 10.0
    assert breaker.probe_due() and breaker.state == "half_open"
    assert not breaker.admits() and not breaker.probe_due()  # one probe at a time, and no user's prompt
    assert breaker.failed("connection", "still refused") is True and breaker.state == "open"
    clock.now = 19.0
    assert not breaker.probe_due()  # the backoff doubled
    clock.now = 30.0
    assert breaker.probe_due()
    breaker.answered()
    assert breaker.admits()
    assert breaker.state == "closed" and breaker.describe() == "up" and breaker.opened == 2


def test_the_run_is_down_only_when_every_endpoint_is_and_refusals_everywhere_stop_it_at_once():
    clock = Clock()
    a, b = (Breaker(1, 5, 5, clock) for _ in range(2))
    outage = Outage({"a": a, "b": b}, outage_seconds=60)
    a.failed("connection", "refused")
    clock.now = 100
    assert outage.why() is None  # b answers
    b.failed("http_503", "HTTP 503: down")
    clock.now = 159
    assert outage.why() is None  # down together for 59 s only
    clock.now = 160
    assert outage.why().startswith("every endpoint has been down for 60 s (a: refused; b: HTTP 503: down)")
    assert refused_everywhere({"a": a, "b": b}) is None  # they fail to answer: wait for them

    c, d = (Breaker(1, 5, 5, clock) for _ in range(2))
    c.failed("http_401", "HTTP 401: bad key")
    assert refused_everywhere({"c": c, "d": d}) is None
    d.failed("not_json", "the response is not JSON: <html>")
    assert refused_everywhere({"c": c, "d": d}) == (
        "every endpoint refuses every request (c: HTTP 401: bad key; d: the response is not JSON: <html>)"
    )


@pytest.mark.parametrize(
    "reason, left_open",
    [
        ("connection", True),
        ("timeout", True),
        ("http_503", True),
        ("http_500", True),
        ("http_429", True),
        ("http_401", True),
        ("http_403", True),
        ("http_407", True),
        ("not_json", True),
        ("no_choices", True),
        ("http_400", False),
        ("http_404", False),
        ("http_413", False),
        ("empty_reasoning", False),
        ("bad_body", False),
        ("invalid_tools", False),
        ("unknown_shape", False),
    ],
)
def test_only_the_prompts_own_answer_settles_it(reason, left_open):
    assert is_open(reason) is left_open


def test_the_table_of_reasons_is_in_the_troubleshooting_page():
    from pathlib import Path

    text = (Path(__file__).parents[3] / "docs" / "troubleshooting.md").read_text()
    for reason, (kind, _) in REASONS.items():
        assert f"| `{reason}` | {kind} |" in text


def test_a_dead_endpoint_that_comes_back_is_let_in_again_by_a_half_open_probe(tmp_path, make_fake_server):
    import threading

    # the healthy server alone would need 5 s for the input; the dead one is back within milliseconds
    dying, healthy = make_fake_server(delay=0.01), make_fake_server(delay=0.05)
    dying.die_after(20)

    def restart_once_dead() -> None:  # back once the healthy one has taken 40 more prompts (the breaker opened)
        while not dying.dead:
            threading.Event().wait(0.01)
        seen = healthy.received
        while healthy.received < seen + 40:
            threading.Event().wait(0.01)
        dying.restart()

    threading.Thread(target=restart_once_dead, daemon=True).start()
    src = write_jsonl(tmp_path / "in.jsonl", prompts(400))
    cfg = config(src, [dying.url, healthy.url], concurrency=4, breaker_backoff=0.05, breaker_max_backoff=0.1)

    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.status == "complete" and manifest.counts["accepted"] == 400 and manifest.counts["open"] == 0
    assert manifest.details["breaker_opened"][dying.url] >= 1
    assert dying.received > 21  # it answered again after it came back
    assert manifest.details["endpoint_states"][dying.url] == "up"


@pytest.mark.timeout(60)  # request_timeout is an hour: a stalled request left to its timeout fails the test here
def test_requests_hanging_on_an_endpoint_whose_breaker_opens_move_at_once_to_a_healthy_one(tmp_path, make_fake_server):
    # the healthy server answers at 0.2 s, so the first burst fills both endpoints: the hanging one gets
    # 4 requests that stall (accepted, never answered), then 503s, the first of which opens its breaker
    hanging, healthy = make_fake_server(), make_fake_server(delay=0.2)
    hanging.inject("stall", times=4, match="Q")  # "Q": the run's prompts, not the probe's
    hanging.inject("503", times=None, match="Q")
    src = write_jsonl(tmp_path / "in.jsonl", prompts(40))
    cfg = config(
        src,
        [hanging.url, healthy.url],
        request_timeout=3600.0,
        max_retries=0,  # a move that cost a retry would leave its prompt open, and the run failed
        breaker_failures=1,
        breaker_backoff=0.2,
        breaker_max_backoff=0.4,
    )

    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.status == "complete" and manifest.counts["accepted"] == 40 and manifest.counts["open"] == 0
    assert settled_once(tmp_path / "out", 40)
    stalled = [p for p in hanging.prompts() if p.startswith("Q")][:4]
    rows = [r for r in accepted(tmp_path / "out").to_dicts() if r["messages"][-1]["content"] in stalled]
    assert len(rows) == 4 and {r["endpoint"] for r in rows} == {healthy.url}  # each moved off the hanging one
    assert manifest.details["retries_by_reason"]["moved"] >= 4  # the stalled ones among those cancelled in flight
    assert manifest.details["breaker_opened"][hanging.url] >= 1
