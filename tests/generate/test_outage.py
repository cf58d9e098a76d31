"""An outage stops the run instead of rejecting the rest of the input, and a rerun resends what
the servers failed; a stray server failure while the others answer stays an ordinary reject."""

import pytest

from eagle3_core.errors import StageError
from eagle3_core.generate.health import ServerHealth, is_server_failure
from eagle3_core.generate.stage import run_generate
from eagle3_core.manifest import read_manifest
from tests.generate.helpers import accepted, config, prompts, rejected, write_jsonl


def test_an_outage_stops_the_run_and_the_rerun_resends_every_prompt_it_rejected(fake_server, tmp_path):
    # 6,000 attempts take several seconds of client CPU alone (1.7 ms each here), far past the 1 s
    # after which the run must stop: so it stops with most of the input never started
    src = write_jsonl(tmp_path / "in.jsonl", prompts(3000))
    cfg = config(src, [fake_server.url], concurrency=4, max_retries=1, outage_seconds=1.0)
    fake_server.inject("503", times=None, match="Q")  # every prompt, not the probe: the server went down

    with pytest.raises(StageError, match="the endpoints are down: no endpoint has answered for") as err:
        run_generate(cfg, tmp_path / "out")

    assert "HTTP 503" in str(err.value) and "a rerun resumes" in str(err.value)
    assert read_manifest(tmp_path / "out").status == "failed"
    lost = rejected(tmp_path / "out")
    assert 0 < len(lost) < 3000  # the outage rejected some prompts, then stopped the run
    assert set(lost["reason"]) == {"http_503"}

    fake_server.clear_faults()  # the server is back
    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.status == "complete"
    assert manifest.counts["accepted"] == 3000 and manifest.counts["rejected"] == 0
    assert accepted(tmp_path / "out")["sample_id"].n_unique() == 3000  # each once: none lost, none twice
    assert len(rejected(tmp_path / "out")) == 0  # the outage's rejects left the folder
    assert set(lost["sample_id"]) <= set(accepted(tmp_path / "out")["sample_id"])


def test_a_run_whose_input_ends_while_the_endpoints_fail_is_not_complete_and_the_rerun_resends_it(
    fake_server, tmp_path
):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(40))
    cfg = config(src, [fake_server.url], concurrency=4, max_retries=1, outage_seconds=600)  # never reached
    fake_server.inject("503", times=None, match="Q")

    with pytest.raises(StageError, match="the endpoints are down"):
        run_generate(cfg, tmp_path / "out")
    assert len(rejected(tmp_path / "out")) == 40  # every prompt had its turn, and failed

    fake_server.clear_faults()
    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.counts["accepted"] == 40 and manifest.counts["rejected"] == 0


def test_a_prompt_that_fails_on_the_server_while_the_others_answer_is_a_reject_not_an_outage(fake_server, tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(10))
    fake_server.inject("503", times=None, match="Q3")

    manifest = run_generate(config(src, [fake_server.url], outage_seconds=0.05), tmp_path / "out")

    assert manifest.status == "complete"
    assert manifest.counts["accepted"] == 9 and manifest.details["reject_reasons"] == {"http_503": 1}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_slow_answers_or_a_few_failures_are_not_an_outage_but_silence_with_failures_is():
    clock = Clock()
    health = ServerHealth(outage_seconds=300, min_failures=4, clock=clock)
    clock.now = 900  # no answer yet for 15 minutes: long answers, nothing failed
    assert health.outage() is None
    health.failed("timeout", "no whole answer within 600 s")
    assert health.outage() is None and health.outage(ended=True) is None  # one stray timeout
    for _ in range(3):
        health.failed("connection", "connection refused")
    assert "no endpoint has answered for 900 s and 4 attempts failed" in health.outage()
    assert "connection refused" in health.outage()

    health.failed("http_400", "prompt too long")  # the server answered: it is up
    assert health.outage() is None
    health.answered()
    for _ in range(10):
        health.failed("http_503", "HTTP 503")
    clock.now += 299
    assert health.outage() is None  # failing, but not for long enough yet ...
    assert "10 attempts failed" in health.outage(ended=True)  # ... unless no prompt is left to wait for


@pytest.mark.parametrize(
    "reason, resent",
    [
        ("connection", True),
        ("timeout", True),
        ("http_503", True),
        ("http_500", True),
        ("http_429", True),
        ("http_400", False),
        ("http_404", False),
        ("empty_reasoning", False),
        ("malformed_body", False),
        ("invalid_tools", False),
    ],
)
def test_only_failures_of_the_server_are_sent_again(reason, resent):
    assert is_server_failure(reason) is resent
