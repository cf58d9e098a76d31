"""A server that answers wrong but answers: a revoked key, a gateway's HTML page, no choices, a
400 every request gets. None of it settles a prompt; the run stops early with the server's words,
and the rerun, once the server behaves, accepts everything the first run left open."""

import json

import pytest

from eagle3_core.endpoint.health import SharedFailure
from eagle3_core.errors import EndpointError, StageError
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import accepted, config, prompts, rejected, write_jsonl

KEY = "sk-test-0123456789abcdef"


def rerun_accepts_all(server, cfg, out, n: int) -> None:
    server.clear_faults()
    manifest = run_generate(cfg, out)
    assert manifest.status == "complete" and manifest.counts["accepted"] == n and manifest.counts["open"] == 0
    assert accepted(out)["sample_id"].n_unique() == n and len(rejected(out)) == 0


@pytest.mark.parametrize(
    "fault, words",
    [("401", "HTTP 401: Error code: 401"), ("html", "502 Bad Gateway"), ("empty_choices", '"choices": []')],
)
def test_a_server_that_turns_to_refusing_after_20_answers_stops_the_run_and_settles_nothing(
    tmp_path, fake_server, fault, words
):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(50)), tmp_path / "out"
    cfg = config(src, [fake_server.url], concurrency=4)
    fake_server.inject(fault, times=None, after=21)  # the probe, then 20 good answers

    with pytest.raises(StageError, match="^every endpoint refuses every request") as err:
        run_generate(cfg, out)

    assert words in str(err.value) and "\n" not in str(err.value)  # one line, the server's own words
    first = read_manifest(out)
    assert first.status == "failed" and first.counts["accepted"] == 20
    assert first.counts["rejected"] == 0 and first.details["reject_reasons"] == {}
    assert first.counts["open"] == first.counts["input"] - 20
    rerun_accepts_all(fake_server, cfg, out, 50)


def test_a_400_every_request_gets_stops_the_run_at_once_and_writes_no_final_reject(tmp_path, fake_server):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(200)), tmp_path / "out"
    cfg = config(src, [fake_server.url], concurrency=4)
    fake_server.inject("400", times=None, match="Q")  # not the probe: a setting every prompt fails on

    with pytest.raises(StageError, match="^every request fails the same way: 32 prompts in a row were http_400"):
        run_generate(cfg, out)

    first = read_manifest(out)
    assert first.status == "failed" and first.counts["rejected"] == 0 and first.counts["accepted"] == 0
    assert first.counts["open"] == first.counts["input"] and len(fake_server.prompts()) < 60  # it stopped early
    assert len(rejected(out)) == 0
    rerun_accepts_all(fake_server, cfg, out, 200)


def test_a_short_run_whose_every_answer_is_the_same_400_is_not_settled_either(tmp_path, fake_server):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(10)), tmp_path / "out"
    cfg = config(src, [fake_server.url], concurrency=4)
    fake_server.inject("400", times=None, match="Q")

    with pytest.raises(StageError, match="^every request fails the same way: 10 prompts in a row"):
        run_generate(cfg, out)

    assert read_manifest(out).counts["open"] == 10 and len(rejected(out)) == 0
    rerun_accepts_all(fake_server, cfg, out, 10)


def test_a_400_for_one_prompt_among_answers_stays_a_final_reject(tmp_path, fake_server):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(40))
    fake_server.inject("400", times=None, match="Q7")
    manifest = run_generate(config(src, [fake_server.url]), tmp_path / "out")
    assert manifest.status == "complete" and manifest.details["reject_reasons"] == {"http_400": 1}
    assert manifest.counts["open"] == 0 and manifest.counts["accepted"] == 39


def test_the_probe_refuses_max_tokens_past_the_served_context_before_any_prompt(tmp_path, make_fake_server):
    server = make_fake_server(max_model_len=512)
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(5)), [server.url], max_tokens=4096)

    with pytest.raises(EndpointError, match="serves a context of 512 tokens \\(max_model_len\\), and max_tokens=4096"):
        run_generate(cfg, tmp_path / "out")

    assert server.prompts() == [server.prompts()[0]] and "Q0" not in server.prompts()  # the probe only


def test_a_prompt_too_long_for_the_context_is_a_final_reject_naming_it_and_the_others_are_answered(
    tmp_path, make_fake_server
):
    # generate counts no prompt's tokens: the probe checks max_tokens with its own short prompt, and a prompt
    # whose own length plus max_tokens exceeds the context is found by the server's answer about it
    server = make_fake_server(max_model_len=512)
    rows = prompts(30) + [{"prompt": f"L{i} " + "x" * 200} for i in range(3)]  # 400 + ~204 tokens > 512
    cfg = config(write_jsonl(tmp_path / "in.jsonl", rows), [server.url], max_tokens=400)

    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.status == "complete" and manifest.counts["accepted"] == 30 and manifest.counts["open"] == 0
    assert manifest.details["reject_reasons"] == {"http_400": 3}
    refused = rejected(tmp_path / "out")
    assert sorted(json.loads(r)["prompt"][:2] for r in refused["input"]) == ["L0", "L1", "L2"]  # each names its row
    assert all("maximum context length is 512 tokens" in d for d in refused["detail"])
    assert refused["sample_id"].null_count() == 0 and sorted(refused["row_index"]) == [30, 31, 32]


def test_a_key_the_probe_is_refused_names_the_setting_and_never_the_key(tmp_path, fake_server, monkeypatch):
    monkeypatch.setenv("EAGLE3_TEST_KEY", KEY)
    fake_server.inject("401_echo", times=None)
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(5)), [fake_server.url], api_key_env="EAGLE3_TEST_KEY")

    with pytest.raises(EndpointError, match="refused the key \\(HTTP 401") as err:
        run_generate(cfg, tmp_path / "out")

    assert "EAGLE3_TEST_KEY" in str(err.value) and "generate.api_key_env" in str(err.value)
    assert KEY not in str(err.value) and "[redacted]" in str(err.value)


def test_a_key_echoed_mid_run_is_kept_out_of_every_row_and_error(tmp_path, fake_server, monkeypatch):
    monkeypatch.setenv("EAGLE3_TEST_KEY", KEY)
    fake_server.inject("401_echo", times=None, match="Q3")  # one prompt only: its rows are kept, open
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(8)), tmp_path / "out"
    cfg = config(src, [fake_server.url], api_key_env="EAGLE3_TEST_KEY")

    with pytest.raises(StageError, match="^1 prompt is still open \\(http_401: 1\\)") as err:
        run_generate(cfg, out)

    row = rejected(out).row(0, named=True)
    assert row["reason"] == "http_401" and "Bearer [redacted]" in row["detail"] and KEY not in row["detail"]
    assert KEY not in str(err.value) and KEY not in (out / "manifest.json").read_text()
    rerun_accepts_all(fake_server, cfg, out, 8)


def test_a_shared_failure_is_a_streak_of_identical_answers_that_connection_failures_do_not_break():
    shared = SharedFailure(attempts=3)
    assert not shared.failed("http_400", "HTTP 400: max_tokens too large")
    assert not shared.failed("connection", "refused")  # the breakers' business: neither counts nor breaks
    assert not shared.failed("http_400", "HTTP 400: max_tokens too large")
    assert shared.failed("http_400", "HTTP 400: max_tokens too large")
    assert (
        shared.error()
        == "every request fails the same way: 3 prompts in a row were http_400: HTTP 400: max_tokens too large"
    )
    shared.answered()
    assert not shared.failed("http_400", "HTTP 400: prompt of 9000 tokens")
    assert not shared.failed("http_400", "HTTP 400: prompt of 9100 tokens")  # another prompt's own words
    assert shared.count == 1 and not shared.every_answer()
