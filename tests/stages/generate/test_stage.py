"""run_generate against the fake vLLM server: every layout, every fault, every row accounted for."""

import pytest

from eagle3_core.errors import StageError
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import Recorder, accepted, config, prompts, rejected, write_jsonl


def balanced(manifest) -> bool:
    c = manifest.counts
    return c["accepted"] + c["rejected"] + c["skipped"] + c["open"] == c["input"]


@pytest.mark.parametrize(
    "layout, source",
    [
        ("reasoning", "reasoning"),
        ("reasoning_content", "reasoning_content"),
        ("both", "reasoning"),
        ("think_tags", "think_tags"),
    ],
)
def test_every_reasoning_layout_is_stored_byte_exact(tmp_path, make_fake_server, layout, source):
    server = make_fake_server(layout=layout)
    src = write_jsonl(tmp_path / "in.jsonl", prompts(5))
    manifest = run_generate(config(src, [server.url]), tmp_path / "out")
    rows = accepted(tmp_path / "out").sort("sample_id")
    assert manifest.counts["accepted"] == 5 and manifest.details["reasoning_sources"] == {source: 5}
    for row in rows.iter_rows(named=True):
        prompt = row["messages"][-1]["content"]
        assert row["reasoning"] == f" Let me think about: {prompt}\n"  # leading space, trailing newline kept
        assert row["content"] == f"\n\nThe answer to {prompt} is 42."
        assert row["reasoning_source"] == source


def test_the_probe_says_in_one_line_where_the_reasoning_is(tmp_path, make_fake_server):
    server = make_fake_server(layout="reasoning_content")
    recorder = Recorder()
    run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [server.url]), tmp_path / "out", recorder)
    probe_lines = [line for line in recorder.lines if line.startswith("probe:")]
    assert len(probe_lines) == 1 and "reasoning in `reasoning_content`" in probe_lines[0]


def test_vllm_token_ids_are_stored_when_returned(tmp_path, fake_server):
    run_generate(config(write_jsonl(tmp_path / "in.jsonl", [{"prompt": "ab"}]), [fake_server.url]), tmp_path / "out")
    row = accepted(tmp_path / "out").row(0, named=True)
    expected = fake_server.completion({"messages": [{"role": "user", "content": "ab"}], "return_token_ids": True})
    assert fake_server.requests[-1]["return_token_ids"] is True
    assert row["prompt_token_ids"] == expected["prompt_token_ids"]
    assert row["completion_token_ids"] == expected["choices"][0]["token_ids"]
    assert row["prompt_tokens"] == 2 and row["model"] == "fake-model" and row["endpoint"] == fake_server.url


@pytest.mark.parametrize("fault", ["500", "503", "429", "drop", "truncated", "empty_reasoning"])
def test_transient_faults_are_retried_until_the_answer_is_good(tmp_path, fake_server, fault):
    fake_server.inject(fault, times=2, match="Q1")
    manifest = run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(3)), [fake_server.url]), tmp_path / "out")
    rows = {r["messages"][-1]["content"]: r for r in accepted(tmp_path / "out").iter_rows(named=True)}
    assert manifest.counts["accepted"] == 3 and rows["Q1"]["attempts"] == 3 and rows["Q0"]["attempts"] == 1
    assert rows["Q1"]["reasoning"] == " Let me think about: Q1\n"
    assert sum(manifest.details["retries_by_reason"].values()) == 2


def test_a_stalled_request_times_out_and_is_retried(tmp_path, fake_server):
    fake_server.inject("stall", times=1, match="Q0")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [fake_server.url], request_timeout=0.5)
    manifest = run_generate(cfg, tmp_path / "out")
    assert manifest.counts["accepted"] == 2 and manifest.details["retries_by_reason"] == {"timeout": 1}


def test_a_400_rejects_the_row_at_once_with_its_reason(tmp_path, fake_server):
    fake_server.inject("400", times=None, match="Q1")
    manifest = run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(3)), [fake_server.url]), tmp_path / "out")
    bad = rejected(tmp_path / "out").row(0, named=True)
    assert fake_server.prompts().count("Q1") == 1
    assert bad["reason"] == "http_400" and bad["input"] == '{"prompt": "Q1"}' and bad["sample_id"]
    assert manifest.counts["accepted"] == 2 and manifest.details["reject_reasons"] == {"http_400": 1}


def test_an_answer_that_never_reasons_is_rejected_after_the_retries(tmp_path, fake_server):
    fake_server.inject("empty_reasoning", times=None, match="Q0")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [fake_server.url], max_retries=2)
    manifest = run_generate(cfg, tmp_path / "out")
    assert fake_server.prompts().count("Q0") == 3
    assert manifest.details["reject_reasons"] == {"empty_reasoning": 1} and balanced(manifest)


def test_length_cut_answers_are_kept_and_counted(tmp_path, fake_server):
    fake_server.inject("length", times=None, match="Q0")
    manifest = run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [fake_server.url]), tmp_path / "out")
    row = accepted(tmp_path / "out").filter(finish_reason="length").row(0, named=True)
    assert manifest.counts["length"] == 1 and row["content"] == "" and row["reasoning"]


def test_bad_rows_are_rejected_with_reasons_and_every_row_is_accounted_for(tmp_path, fake_server):
    rows = prompts(4) + [
        {"prompt": "Q1"},
        {"text": "?"},
        {"prompt": ""},
        {"prompt": 3},
        {"conversations": [{"from": "human", "value": "Q9"}, {"from": "gpt", "value": "old"}]},
    ]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    with open(src, "a") as fh:
        fh.write("{not json\n")
    manifest = run_generate(config(src, [fake_server.url]), tmp_path / "out")
    c = manifest.counts
    assert (c["input"], c["accepted"], c["rejected"], c["skipped"]) == (10, 5, 4, 1)
    assert manifest.details["reject_reasons"] == {
        "unknown_shape": 1,
        "empty_prompt": 1,
        "non_string_content": 1,
        "invalid_json": 1,
    }
    assert sorted(rejected(tmp_path / "out")["row_index"].to_list()) == [5, 6, 7, 9]
    assert fake_server.prompts().count("Q1") == 1  # the repeat was skipped, not requested


def test_without_required_reasoning_plain_answers_are_kept(tmp_path, make_fake_server):
    server = make_fake_server(layout="none")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [server.url], require_reasoning=False)
    manifest = run_generate(cfg, tmp_path / "out")
    rows = accepted(tmp_path / "out")
    assert manifest.counts["accepted"] == 2 and rows["reasoning"].to_list() == ["", ""]
    assert rows["reasoning_source"].to_list() == [None, None]


def test_a_run_that_requires_reasoning_keeps_no_answer_an_earlier_run_took_without_it(tmp_path, make_fake_server):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(3))
    run_generate(config(src, [make_fake_server(layout="none").url], require_reasoning=False), tmp_path / "out")
    manifest = run_generate(config(src, [make_fake_server(layout="reasoning").url]), tmp_path / "out")
    rows = accepted(tmp_path / "out")
    assert manifest.counts["accepted"] == 3 == len(rows) and "" not in rows["reasoning"].to_list()


def test_several_endpoints_share_the_work(tmp_path, make_fake_server):
    a, b = make_fake_server(delay=0.02), make_fake_server(delay=0.02)
    manifest = run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(40)), [a.url, b.url]), tmp_path / "out")
    assert manifest.counts["accepted"] == 40
    assert len(a.requests) > 5 and len(b.requests) > 5  # each got a real share (probe aside)


def test_a_second_run_resumes_and_requests_only_what_is_missing(tmp_path, fake_server):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(30))
    run_generate(config(src, [fake_server.url], max_samples=12), tmp_path / "out")
    first = set(fake_server.prompts())
    fake_server.requests.clear()
    manifest = run_generate(config(src, [fake_server.url]), tmp_path / "out")
    second = set(fake_server.prompts())
    assert not (first & second - {"What is 2 + 3? Think briefly, then answer."})
    assert manifest.counts["resumed"] == 12 and manifest.counts["accepted"] == 30 and balanced(manifest)
    assert accepted(tmp_path / "out")["sample_id"].n_unique() == 30 == len(accepted(tmp_path / "out"))


def test_a_run_with_other_sampling_in_the_same_folder_keeps_none_of_the_earlier_rows(tmp_path, fake_server):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(5))
    run_generate(config(src, [fake_server.url]), tmp_path / "out")
    manifest = run_generate(config(src, [fake_server.url], temperature=0.9), tmp_path / "out")
    fresh = run_generate(config(src, [fake_server.url], temperature=0.9), tmp_path / "fresh")
    rows = accepted(tmp_path / "out")
    assert manifest.counts["accepted"] == 5 == len(rows) and len(manifest.shards) == 1
    assert set(rows["sample_id"]) == set(accepted(tmp_path / "fresh")["sample_id"]) and fresh.counts["resumed"] == 0


def test_a_smaller_run_in_the_same_folder_keeps_only_its_own_rows(tmp_path, fake_server):
    rows = prompts(30)
    rows[20] = {"text": "no prompt field"}  # an unkeyed reject, found by its row index
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    run_generate(config(src, [fake_server.url]), tmp_path / "out")
    fake_server.requests.clear()
    manifest = run_generate(config(src, [fake_server.url], max_samples=12), tmp_path / "out")
    assert fake_server.prompts() == ["What is 2 + 3? Think briefly, then answer."]  # the probe only
    assert manifest.counts["resumed"] == 12 == len(accepted(tmp_path / "out")) and balanced(manifest)
    assert sorted(accepted(tmp_path / "out")["messages"].list.last().struct.field("content")) == sorted(
        f"Q{i}" for i in range(12)
    )
    assert rejected(tmp_path / "out").is_empty() and not any(name.startswith("rejected/") for name in manifest.shards)


def test_a_resumed_run_counts_the_earlier_rejects_under_their_reasons(tmp_path, fake_server):
    rows = prompts(5)
    rows[0] = {"text": "no prompt field"}
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    fake_server.inject("400", times=1, match="Q1")
    run_generate(config(src, [fake_server.url], max_samples=3), tmp_path / "out")
    fake_server.inject("400", times=1, match="Q3")
    manifest = run_generate(config(src, [fake_server.url]), tmp_path / "out")
    assert manifest.counts["resumed"] == 3 and manifest.counts["rejected"] == 3
    assert manifest.details["reject_reasons"] == {"http_400": 2, "unknown_shape": 1}


def test_a_complete_stage_is_skipped_without_a_request(tmp_path, fake_server):
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(3)), [fake_server.url])
    first = run_generate(cfg, tmp_path / "out")
    fake_server.requests.clear()
    again = run_generate(cfg, tmp_path / "out")
    assert fake_server.requests == [] and again.counts == first.counts and again.status == "complete"


def test_auto_concurrency_records_its_timeline(tmp_path, fake_server):
    fake_server.inject("stall", times=2)
    cfg = config(
        write_jsonl(tmp_path / "in.jsonl", prompts(60)),
        [fake_server.url],
        concurrency="auto",
        max_concurrency=16,
        request_timeout=0.5,
    )
    manifest = run_generate(cfg, tmp_path / "out")
    timeline = manifest.details["concurrency_timeline"][fake_server.url]
    assert manifest.counts["accepted"] == 60
    assert len(timeline) > 1 and all(1 <= limit <= 16 for _, limit in timeline)


def test_messages_and_sharegpt_rows_from_parquet_and_a_directory(tmp_path, fake_server):
    import polars as pl

    folder = tmp_path / "prompts"
    folder.mkdir()
    pl.DataFrame(
        {"conversations": [[{"from": "human", "value": "P1"}], [{"from": "human", "value": "P2"}]]}
    ).write_parquet(folder / "a.parquet")
    write_jsonl(
        folder / "b.jsonl", [{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "P3"}]}]
    )
    manifest = run_generate(config(folder, [fake_server.url]), tmp_path / "out")
    assert manifest.counts["accepted"] == 3
    assert sorted(fake_server.prompts())[:3] == ["P1", "P2", "P3"]


def test_an_answer_that_trickles_in_past_the_deadline_is_a_timeout_never_a_cut_accept(tmp_path, fake_server):
    # every read gets bytes within 0.2 s, so only a deadline on the whole answer can stop it
    fake_server.inject("trickle", times=1, match="Q0")
    fake_server.inject("trickle", times=None, match="Q1")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [fake_server.url], request_timeout=1.0, max_retries=1)
    with pytest.raises(StageError, match=r"^1 prompt is still open \(timeout: 1\)"):
        run_generate(cfg, tmp_path / "out")  # a timeout is the server's failure: Q1 is not settled
    manifest = read_manifest(tmp_path / "out")
    row = accepted(tmp_path / "out").row(0, named=True)
    assert row["messages"][-1]["content"] == "Q0" and row["content"] == "\n\nThe answer to Q0 is 42."
    assert row["attempts"] == 2
    assert manifest.status == "failed" and manifest.details["retries_by_reason"] == {"timeout": 2}
    assert manifest.counts["open"] == 1 and manifest.counts["rejected"] == 0 and balanced(manifest)
    assert manifest.details["open_reasons"] == {"timeout": 1}

    fake_server.clear_faults()
    again = run_generate(cfg, tmp_path / "out")
    assert again.counts["accepted"] == 2 and again.counts["open"] == 0 and len(rejected(tmp_path / "out")) == 0
