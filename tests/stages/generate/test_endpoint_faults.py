"""Endpoints that are up and wrong: hung, answering as another model, refusing the key, echoing
it, sending two reasoning fields that disagree. Each costs bounded time, stores nothing it
should not, and says so in one warning line (issue 33)."""

from __future__ import annotations

import pytest

from eagle3_core.endpoint.client import PROBE_MESSAGES
from eagle3_core.errors import EndpointError
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import Recorder, accepted, config, prompts, rejected, write_jsonl

KEY = "sk-test-0123456789abcdef"
PROBE = PROBE_MESSAGES[-1]["content"]


def warnings(recorder: Recorder) -> list[str]:
    return [line for line in recorder.lines if line.startswith("generate: warning: ")]


@pytest.mark.timeout(60)  # request_timeout is an hour: a run that waited on a hung request fails here
def test_a_hung_endpoint_costs_its_overdue_bound_and_its_probes_not_the_request_timeout(tmp_path, make_fake_server):
    # both answer in ~20 ms; after 30 chats one of them accepts every request (its probes too) and never answers
    hanging, healthy = make_fake_server(delay=0.02), make_fake_server(delay=0.02)
    hanging.inject("stall", times=None, after=30)
    src, out, recorder = write_jsonl(tmp_path / "in.jsonl", prompts(300)), tmp_path / "out", Recorder()
    cfg = config(
        src,
        [hanging.url, healthy.url],
        concurrency=4,
        request_timeout=3600.0,
        overdue_min_seconds=1.0,
        breaker_probe_timeout=0.5,
        breaker_backoff=0.2,
        breaker_max_backoff=0.5,
    )

    manifest = run_generate(cfg, out, recorder)

    assert manifest.status == "complete" and manifest.counts["accepted"] == 300 and manifest.counts["open"] == 0
    assert manifest.details["breaker_opened"][hanging.url] >= 1
    stalled = [p for p in hanging.prompts() if p != PROBE][-4:]
    rows = accepted(out).filter(accepted(out)["messages"].list.last().struct.field("content").is_in(stalled))
    assert rows.height == 4 and set(rows["endpoint"]) == {healthy.url}  # each hung prompt answered elsewhere
    retries = manifest.details["retries_by_reason"]
    assert retries.get("timeout", 0) == 0 and retries["moved"] >= 4  # moved when overdue, none waited out
    hung = [w for w in warnings(recorder) if "stopped answering" in w]
    assert len(hung) == 1 and hanging.url in hung[0]
    probes = [p for p in hanging.prompts() if p == PROBE]
    assert len(probes) >= 2  # the start's and at least one half-open probe: a short request, not a prompt
    assert len([p for p in hanging.prompts() if p != PROBE]) <= 30 + 4  # no user prompt went to it once it hung


def test_a_long_answer_on_a_live_endpoint_is_never_overdue(tmp_path, make_fake_server):
    """One prompt 30x slower than the rest, while the endpoint answers the others: not a hang."""
    server = make_fake_server(delay=0.02)
    server.inject("trickle", times=1, match="Q5")  # 16 bytes every 0.2 s: seconds for one answer
    src, out, recorder = write_jsonl(tmp_path / "in.jsonl", prompts(100)), tmp_path / "out", Recorder()
    cfg = config(src, [server.url], concurrency=4, overdue_min_seconds=0.3, request_timeout=60.0)

    manifest = run_generate(cfg, out, recorder)

    assert manifest.status == "complete" and manifest.counts["accepted"] == 100
    assert manifest.details["retries_by_reason"] == {} and not warnings(recorder)
    assert manifest.details["breaker_opened"].get(server.url, 0) == 0


def test_an_endpoint_answering_as_another_model_is_shut_out_and_none_of_its_answers_is_stored(
    tmp_path, make_fake_server
):
    # the start's probe is answered as the model asked for; every later chat by another backend
    wrong, right = make_fake_server(answer_model="other-model", answer_model_after=1), make_fake_server(delay=0.01)
    src, out, recorder = write_jsonl(tmp_path / "in.jsonl", prompts(60)), tmp_path / "out", Recorder()
    cfg = config(src, [wrong.url, right.url], model="fake-model", breaker_backoff=0.2, breaker_max_backoff=0.4)

    manifest = run_generate(cfg, out, recorder)

    rows = accepted(out)
    assert manifest.status == "complete" and manifest.counts["accepted"] == 60 and rows.height == 60
    assert set(rows["endpoint"]) == {right.url} and set(rows["model"]) == {"fake-model"}
    assert manifest.details["breaker_opened"][wrong.url] >= 1
    said = [w for w in warnings(recorder) if "other-model" in w]
    assert len(said) == 1 and wrong.url in said[0] and "never stored" in said[0]


def test_a_lone_endpoint_answering_as_another_model_stops_the_run_at_the_probe(tmp_path, make_fake_server):
    server = make_fake_server(answer_model="other-model")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(5)), [server.url], model="fake-model")

    with pytest.raises(EndpointError, match="answers as model 'other-model', not 'fake-model'"):
        run_generate(cfg, tmp_path / "out")

    assert [p for p in server.prompts() if p != PROBE] == []


def test_a_served_alias_of_the_model_is_the_same_model(tmp_path, make_fake_server):
    """vLLM's ``--served-model-name toy toy-alias`` lists both and answers as the first."""
    server = make_fake_server(model="toy", aliases=("toy-alias",))
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(20)), [server.url], model="toy-alias")

    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.status == "complete" and manifest.counts["accepted"] == 20
    assert server.completion({"model": "toy-alias", "messages": []})["model"] == "toy"  # as vLLM answers


def test_an_answer_holding_the_key_is_a_final_reject_and_the_key_is_nowhere_on_disk(tmp_path, fake_server, monkeypatch):
    monkeypatch.setenv("EAGLE3_TEST_KEY", KEY)
    fake_server.inject("echo_key", times=None, match="Q3")
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(10)), tmp_path / "out"
    cfg = config(src, [fake_server.url], api_key_env="EAGLE3_TEST_KEY")

    manifest = run_generate(cfg, out)

    assert manifest.status == "complete" and manifest.counts["accepted"] == 9 and manifest.counts["open"] == 0
    row = rejected(out).row(0, named=True)
    assert row["reason"] == "secret_in_answer" and "EAGLE3_TEST_KEY" in row["detail"]
    assert fake_server.prompts().count("Q3") == 1  # final: no retry asks the model to say it again
    assert all(KEY.encode() not in path.read_bytes() for path in out.rglob("*") if path.is_file())


def test_an_endpoint_that_refuses_the_key_mid_run_gets_one_warning_line(tmp_path, make_fake_server):
    refusing, healthy = make_fake_server(), make_fake_server(delay=0.01)
    refusing.inject("401", times=None, after=1)  # the start's probe passed, then the key was revoked there
    src, recorder = write_jsonl(tmp_path / "in.jsonl", prompts(60)), Recorder()
    cfg = config(src, [refusing.url, healthy.url], breaker_backoff=0.1, breaker_max_backoff=0.2)

    manifest = run_generate(cfg, tmp_path / "out", recorder)

    assert manifest.status == "complete" and manifest.counts["accepted"] == 60
    said = [w for w in warnings(recorder) if "refuses the key" in w]
    assert len(said) == 1 and refusing.url in said[0] and "OPENAI_API_KEY" in said[0]


def test_reasoning_fields_that_disagree_get_one_warning_line_and_reasoning_is_read(tmp_path, make_fake_server):
    server = make_fake_server(layout="both_differ")
    src, out, recorder = write_jsonl(tmp_path / "in.jsonl", prompts(10)), tmp_path / "out", Recorder()

    manifest = run_generate(config(src, [server.url]), out, recorder)

    assert manifest.status == "complete" and manifest.counts["accepted"] == 10
    assert not any(accepted(out)["reasoning"].str.contains("rephrased"))
    said = [w for w in warnings(recorder) if "differ" in w]
    assert len(said) == 1 and server.url in said[0]
