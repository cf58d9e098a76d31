"""`generate.turns: all`: every answer turn regenerated in order on the target's own earlier answers,
resumed per turn after a kill, and keyed apart from `last`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import accepted, config, write_jsonl


def conversation(i: int, turns: int = 3) -> dict:
    """A row of ``turns`` user turns, each but the last answered by some other model."""
    messages = []
    for t in range(turns):
        messages.append({"role": "user", "content": f"C{i}T{t}"})
        if t < turns - 1:
            messages.append({"role": "assistant", "content": f"someone else's answer {i}.{t}"})
    return {"messages": messages}


def turns_rows(out: Path) -> pl.DataFrame:
    files = sorted((out / "turns").glob("part-*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame()


def asked(request: dict) -> tuple[str, int]:
    """(conversation, turn) of one request: its first user turn, and the answers before it."""
    messages = request["messages"]
    return messages[0]["content"], sum(m["role"] == "assistant" for m in messages)


def chats(server) -> list[dict]:
    return [r for r in server.requests if r["messages"][0]["content"].startswith("C")]


def test_all_regenerates_each_turn_in_order_on_the_targets_own_answers(tmp_path, fake_server):
    src, out = write_jsonl(tmp_path / "in.jsonl", [conversation(0)]), tmp_path / "out"
    manifest = run_generate(config(src, [fake_server.url], turns="all"), out)

    sent = [r["messages"] for r in chats(fake_server)]
    assert [[m["content"] for m in s if m["role"] == "user"] for s in sent] == [
        ["C0T0"],
        ["C0T0", "C0T1"],
        ["C0T0", "C0T1", "C0T2"],
    ]
    own = fake_server.completion({"messages": [{"role": "user", "content": "C0T1"}]})["choices"][0]["message"]
    history = sent[2][3]
    assert history == {
        "role": "assistant",
        "content": own["content"],
        "reasoning": own["reasoning"],
        "reasoning_content": own["reasoning"],
    }, "the target's own answer and its reasoning are the history, never the dataset's"
    assert not any("someone else" in json.dumps(s) for s in sent)
    final = accepted(out).row(0, named=True)
    assert [m["content"] for m in final["messages"]] == [m["content"] for m in sent[2]]
    assert final["messages"][3]["reasoning"] == own["reasoning"]
    earlier = turns_rows(out)
    assert earlier["turn"].to_list() == [0, 1] and set(earlier["conversation_id"]) == {final["sample_id"]}
    assert (manifest.counts["accepted"], manifest.counts["turns"], manifest.counts["requests"]) == (1, 2, 3)


def test_a_turn_that_calls_tools_stays_the_datasets(tmp_path, fake_server):
    call = {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 1}'}}
    row = {
        "messages": [
            {"role": "user", "content": "C0T0"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "calc", "content": "2"},
            {"role": "assistant", "content": "someone else's answer"},
            {"role": "user", "content": "C0T1"},
        ]
    }
    src, out = write_jsonl(tmp_path / "in.jsonl", [row]), tmp_path / "out"
    run_generate(config(src, [fake_server.url], turns="all"), out)

    sent = [r["messages"] for r in chats(fake_server)]
    assert [len(s) for s in sent] == [3, 5], "the answer after the tool result is regenerated, the call is not"
    assert sent[0][1]["tool_calls"][0]["function"]["name"] == "calc" and sent[1][2]["role"] == "tool"
    assert "someone else" not in json.dumps(sent[1])


def test_last_and_all_never_take_each_others_answers(tmp_path, fake_server):
    src, out = write_jsonl(tmp_path / "in.jsonl", [conversation(i) for i in range(4)]), tmp_path / "out"
    last = run_generate(config(src, [fake_server.url]), out)
    ids_last = set(accepted(out)["sample_id"])
    fake_server.requests.clear()

    every = run_generate(config(src, [fake_server.url], turns="all"), out)
    assert every.counts["resumed"] == 0 and len(chats(fake_server)) == 12, "no `last` answer was taken"
    assert not ids_last & set(accepted(out)["sample_id"]) and len(accepted(out)) == 4
    fake_server.requests.clear()

    again = run_generate(config(src, [fake_server.url]), out)
    assert again.counts["resumed"] == 0 and len(chats(fake_server)) == 4, "no `all` answer was taken"
    assert set(accepted(out)["sample_id"]) == ids_last and last.status == again.status == "complete"
    assert not (out / "turns").exists() or turns_rows(out).is_empty(), "the `all` run's turns left with it"


def test_turns_all_needs_a_server():
    with pytest.raises(ValidationError, match="generate.turns: all regenerates each turn on a server"):
        GenerateConfig(turns="all", source="dataset")


KILLED_RUN = """
import sys
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import config
run_generate(config(sys.argv[1], [sys.argv[2]], turns="all", concurrency=2, shard_rows=1), sys.argv[3])
"""


def test_a_killed_run_redoes_no_finished_turn_and_writes_no_duplicate(tmp_path, make_fake_server):
    server = make_fake_server(delay=0.05)
    src, out = write_jsonl(tmp_path / "in.jsonl", [conversation(i, turns=4) for i in range(12)]), tmp_path / "out"
    first = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(src), server.url, str(out)], cwd=Path.cwd())
    try:
        deadline = time.monotonic() + 60
        while len(list((out / "turns").glob("part-*.parquet"))) < 9 and time.monotonic() < deadline:
            assert first.poll() is None, "the run ended before the kill"
            time.sleep(0.02)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    durable = {(r["conversation_id"], r["turn"]) for r in turns_rows(out).iter_rows(named=True)}
    finals = accepted(out)
    assert 9 <= len(durable) and len(finals) < 12, "the kill must land mid-run"
    durable_asks = {(r["messages"][0]["content"], r["turn"]) for r in turns_rows(out).iter_rows(named=True)}
    server.requests.clear()

    manifest = run_generate(config(src, [server.url], turns="all", concurrency=2), out)

    again = [asked(r) for r in chats(server)]
    assert not durable_asks & set(again), "a durable turn was requested again"
    assert len(again) == len(set(again)), "a turn was requested twice"
    assert manifest.counts["turns_resumed"] > 0, "some conversation must resume mid-way"
    rows = turns_rows(out)
    assert rows.select("conversation_id", "turn").is_unique().all() and len(rows) == 12 * 3
    final = accepted(out)
    assert final["sample_id"].n_unique() == len(final) == 12 and manifest.counts["accepted"] == 12
    assert durable <= {(r["conversation_id"], r["turn"]) for r in rows.iter_rows(named=True)}
