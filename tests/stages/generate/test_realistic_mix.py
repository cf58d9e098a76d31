"""A healthy run on realistic data completes: some prompts are never reasoned on, some are too long
for the context, some are refused. Such prompts are settled final by their own answers (the
shared-failure stop judges distinct prompts' first answers, never the retries that make up a
run's tail), the run ends complete, and the rerun sends nothing. The loopback server stands in
for vLLM here because vLLM will not skip reasoning on chosen prompts on demand; its mix is fixed
per prompt by a hash, so the expected counts are computed from the same rule."""

from __future__ import annotations

import pytest

from eagle3_core.endpoint.health import SharedFailure
from eagle3_core.stages.generate.stage import run_generate
from tests.fixtures.fake_server import Mix
from tests.stages.generate.helpers import accepted, config, rejected, write_jsonl

CONTEXT = 512  # the server's max_model_len; a long prompt (~300 bytes) plus max_tokens 300 is past it
MAX_TOKENS = 300


def mixed_rows(n: int, long_every: int = 100) -> list[dict]:
    """``n`` prompts; one in ``long_every`` is too long for the context."""
    return [{"prompt": f"L{i} " + "x" * 300} if i % long_every == 7 else {"prompt": f"Q{i}"} for i in range(n)]


def expected(rows: list[dict], mix: Mix) -> dict[str, int]:
    long = sum(r["prompt"].startswith("L") for r in rows)
    never = sum(
        not r["prompt"].startswith("L") and mix.prompt_share(r["prompt"], "never") < mix.never_reasoning for r in rows
    )
    return {"http_400": long, "empty_reasoning": never, "accepted": len(rows) - long - never}


@pytest.mark.parametrize(
    "n, in_flight, never",
    [(3000, 128, 0.02), (1500, 64, 0.20), (400, 8, 0.02)],
    ids=["3000x128-2%", "1500x64-20%", "400x8-2%"],
)
def test_a_run_where_some_prompts_never_reason_completes_and_its_rerun_sends_nothing(
    tmp_path, make_fake_server, n, in_flight, never
):
    mix = Mix(never_reasoning=never, refusing=0.03)
    server = make_fake_server(mix=mix, max_model_len=CONTEXT)
    rows = mixed_rows(n)
    want = expected(rows, mix)
    assert want["empty_reasoning"] >= 8  # their retries are the run's tail, which used to stop it
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out"
    cfg = config(src, [server.url], concurrency=in_flight, max_tokens=MAX_TOKENS, shard_rows=500)

    manifest = run_generate(cfg, out)

    assert manifest.status == "complete" and manifest.counts["open"] == 0
    assert manifest.details["reject_reasons"] == {
        "empty_reasoning": want["empty_reasoning"],
        "http_400": want["http_400"],
    }
    assert manifest.counts["accepted"] == want["accepted"] and accepted(out)["sample_id"].n_unique() == want["accepted"]
    refused = accepted(out).filter(accepted(out)["content"].str.contains("can't help"))
    assert len(refused) > 0 and refused["reasoning"].str.len_chars().min() > 0  # a refusal that reasons is an answer
    assert set(manifest.details["breaker_opened"].values()) == {0}  # hopeless prompts are theirs, not the endpoint's
    sent = len(server.requests)
    assert run_generate(cfg, out).status == "complete" and len(server.requests) == sent  # the rerun sends nothing


def test_a_rerun_whose_open_prompts_all_never_reason_settles_them_final(tmp_path, make_fake_server):
    """A run killed at its tail leaves open exactly the prompts still retrying: those that never
    reason. The rerun sends only them (hundreds, each answered the same empty way) and settles them."""
    mix = Mix(never_reasoning=0.20)
    server = make_fake_server(mix=mix)
    rows = mixed_rows(1000, long_every=10**9)
    good = [r for r in rows if mix.prompt_share(r["prompt"], "never") >= mix.never_reasoning]
    out = tmp_path / "out"
    run_generate(config(write_jsonl(tmp_path / "good.jsonl", good), [server.url], concurrency=32, shard_rows=200), out)
    sent = len(server.requests)

    manifest = run_generate(config(write_jsonl(tmp_path / "in.jsonl", rows), [server.url], concurrency=32), out)

    hopeless = len(rows) - len(good)
    assert manifest.status == "complete" and manifest.counts["open"] == 0 and hopeless > 100
    assert manifest.details["reject_reasons"] == {"empty_reasoning": hopeless}
    assert manifest.counts["accepted"] == len(good) and len(rejected(out)) == hopeless
    asked = {r["messages"][-1]["content"] for r in server.requests[sent:]}
    assert asked - {server.requests[sent]["messages"][-1]["content"]} == {r["prompt"] for r in rows} - {
        r["prompt"] for r in good
    }  # the probe, then only the open prompts


def test_four_endpoints_keep_their_breakers_closed_under_hopeless_prompts(tmp_path, make_fake_server):
    mix = Mix(never_reasoning=0.20)
    servers = [make_fake_server(mix=mix) for _ in range(4)]
    rows = mixed_rows(800, long_every=10**9)
    cfg = config(write_jsonl(tmp_path / "in.jsonl", rows), [s.url for s in servers], concurrency=4, shard_rows=200)

    manifest = run_generate(cfg, tmp_path / "out")

    assert manifest.status == "complete" and manifest.counts["open"] == 0
    assert set(manifest.details["breaker_opened"].values()) == {0}
    assert set(manifest.details["endpoint_states"].values()) == {"up"}
    assert manifest.details["reject_reasons"] == {"empty_reasoning": expected(rows, mix)["empty_reasoning"]}


def test_the_shared_failure_judge_counts_prompts_not_retries_and_never_what_the_probe_ruled_out():
    shared = SharedFailure(attempts=3, ruled_out=frozenset({"empty_reasoning"}))
    for _ in range(10):
        assert not shared.failed("empty_reasoning", "the answer has no reasoning")  # the probe saw reasoning
    assert shared.signature is None and shared.total == 0
    assert not shared.failed("http_400", "HTTP 400: bad setting")
    shared.answered()  # any answer breaks the streak
    assert not shared.failed("http_400", "HTTP 400: bad setting")
    assert not shared.failed("http_400", "HTTP 400: bad setting")
    assert shared.failed("http_400", "HTTP 400: bad setting")
    assert not shared.every_answer()  # an answer came first


@pytest.mark.slow
def test_eagle3_generate_on_a_realistic_mix_exits_0_naming_its_final_rejects(tmp_path, make_fake_server, prefect_api):
    from tests.stages.generate.test_cli import generate_args, run_cli

    mix = Mix(never_reasoning=0.20, refusing=0.03)
    server = make_fake_server(mix=mix, max_model_len=CONTEXT)
    rows = mixed_rows(400, long_every=50)
    want = expected(rows, mix)
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out"
    args = generate_args(src, server.url, out, "--concurrency", "16", "--max-tokens", str(MAX_TOKENS))

    first = run_cli(args)

    assert first.returncode == 0, first.stderr
    assert (
        f"{want['accepted']} accepted, {want['empty_reasoning'] + want['http_400']} rejected "
        f"(empty_reasoning: {want['empty_reasoning']}, http_400: {want['http_400']})" in first.stdout
    )
    sent = len(server.requests)
    second = run_cli(args)
    assert second.returncode == 0 and len(server.requests) == sent, second.stderr  # the rerun sends nothing
