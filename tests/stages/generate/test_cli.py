"""`eagle3 generate` as a user runs it: a real subprocess, its flow reporting to the test Prefect API.

The kill test is the property the issue was filed for: a run killed with SIGKILL and started
again with the same arguments requests no persisted sample, writes no duplicate, and ends with
accepted + rejected + skipped == input; on the command's own ephemeral Prefect API, the rerun gets
the dead run's slots back a lease and a sweep after the kill (issue 33), by itself.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.stages.generate.helpers import accepted, prompts, rejected, write_jsonl

EAGLE3 = str(Path(sys.executable).with_name("eagle3"))


def cli_env() -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return os.environ | {"PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONUNBUFFERED": "1"}


def generate_args(src: Path, url: str, out: Path, *extra: str) -> list[str]:
    return [
        EAGLE3,
        "generate",
        "--input",
        str(src),
        "--base-url",
        url,
        "--out",
        str(out),
        "--retry-initial-wait",
        "0",
        "--no-progress",
        *extra,
    ]


def run_cli(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=cli_env(), capture_output=True, text=True, timeout=300, **kwargs)


def own_api_env(home: Path) -> dict[str, str]:
    """The command run as a user runs it, with no Prefect API of theirs: it starts its own
    ephemeral API, on the database and lease files under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
    return env | {"PREFECT_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def persisted_rows(out: Path) -> int:
    total = 0
    for file in (out / "accepted").glob("part-*.parquet"):
        total += pl.read_parquet(file, columns=["sample_id"]).height
    return total


@pytest.mark.slow
@pytest.mark.prefect_server  # the command starts its own Prefect API
def test_a_killed_run_resumes_without_rerequesting_or_duplicating(tmp_path, make_fake_server):
    from tasks.ephemeral_api import SWEEP_SECONDS

    server = make_fake_server(delay=0.1)
    rows = prompts(200) + [{"prompt": "Q3"}, {"nothing": "here"}]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out"
    args = generate_args(src, server.url, out, "--concurrency", "4", "--shard-rows", "5", "--flush-seconds", "0.2")
    env = own_api_env(tmp_path / "prefect-home")  # its own API: nothing outside the command frees a slot
    first = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while persisted_rows(out) < 30 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first.poll() is None, first.stderr.read()
    assert server.in_flight_peak == 4  # the limit (4) all leased by the run about to die
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    done_before = {r["messages"][-1]["content"] for r in accepted(out).iter_rows(named=True)}
    assert 30 <= len(done_before) < 200, "the kill must land mid-run"

    server.requests.clear()
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    # its own ephemeral API logs no traceback (its telemetry once raced the run for the database)
    assert "Traceback" not in second.stdout + second.stderr, (second.stdout + second.stderr)[-3000:]

    # the dead run's leases lapse within a lease (60 s) of the kill; the rerun's API sweeps them
    # within SWEEP_SECONDS and its keeper takes them within a tick: 10 s more for this box's slack
    first_chat = min(start for prompt, start, _ in server.log if start > killed and prompt.startswith("Q"))
    assert first_chat - killed <= 60 + SWEEP_SECONDS + 10, (
        f"the rerun's first chat came {first_chat - killed:.0f} s after the kill"
    )
    rows_after = accepted(out)
    assert rows_after["sample_id"].n_unique() == len(rows_after) == 200
    assert not done_before & set(server.prompts()), "a persisted sample was requested again"
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["counts"]
    assert (counts["input"], counts["accepted"], counts["rejected"], counts["skipped"]) == (202, 200, 1, 1)
    assert counts["resumed"] >= len(done_before)
    assert len(rejected(out)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unreachable endpoint", "missing dataset", "missing file"])
def test_user_mistakes_are_one_clear_message_without_a_traceback(tmp_path, fake_server, prefect_api, case):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(3))
    url = fake_server.url
    if case == "unreachable endpoint":
        url = "http://127.0.0.1:9/v1"
    elif case == "missing dataset":
        src = "no-such-org/no-such-dataset"
    else:
        src = tmp_path / "nope.jsonl"
    result = run_cli(generate_args(src, url, tmp_path / "out"))
    expected = {
        "unreachable endpoint": "cannot reach",
        "missing dataset": "cannot load dataset 'no-such-org/no-such-dataset'",
        "missing file": "input not found",
    }[case]
    assert result.returncode == 2
    assert f"error: {expected}" in result.stderr and "fix:" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def limit_file_size() -> None:
    """In the child: files may not grow past 24 KB, as on a disk that is nearly full."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an OSError (EFBIG) instead of a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (24_000, 24_000))


@pytest.mark.slow
def test_a_full_disk_stops_with_a_clear_error_and_leaves_no_damaged_shard(tmp_path, fake_server, prefect_api):
    rng = random.Random(0)
    long_prompts = [{"prompt": "".join(rng.choices("abcdefghij klmnop", k=3000))} for _ in range(20)]
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(10) + long_prompts), tmp_path / "out"
    args = generate_args(src, fake_server.url, out, "--shard-rows", "5", "--concurrency", "1")
    full = run_cli(args, preexec_fn=limit_file_size)
    assert full.returncode == 2
    assert "error: cannot write shard" in full.stderr and "free disk space" in full.stderr
    assert "Traceback" not in full.stderr
    assert not list(out.rglob("*.tmp"))
    shards = sorted((out / "accepted").glob("part-*.parquet"))
    assert shards and all(pl.read_parquet(f).height > 0 for f in shards)  # every shard whole and readable

    again = run_cli(args)
    assert again.returncode == 0, again.stderr
    assert accepted(out)["sample_id"].n_unique() == len(accepted(out)) == 30


@pytest.mark.slow
def test_family_sends_and_records_the_familys_chat_settings(tmp_path, fake_server, prefect_api):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(2))
    result = run_cli(generate_args(src, fake_server.url, tmp_path / "out", "--family", "qwen3"))
    assert result.returncode == 0, result.stderr
    assert all(body["chat_template_kwargs"] == {"enable_thinking": True} for body in fake_server.requests)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["details"]["chat"]["chat_template_kwargs"] == {"enable_thinking": True}
