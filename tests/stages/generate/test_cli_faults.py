"""`eagle3 generate` against misbehaving servers, as a user runs it (a subprocess, its flow on the
test Prefect API): exit 2 and one `error:` line, and the API key nowhere eagle3 writes."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.stages.generate.helpers import accepted, prompts, write_jsonl
from tests.stages.generate.test_cli import generate_args, run_cli

KEY = "sk-live-echoed-0123456789abcdef"


def prefect_database() -> list[Path]:
    from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL

    url = PREFECT_API_DATABASE_CONNECTION_URL.value()
    path = Path(url.split(":///", 1)[1])
    return [p for p in path.parent.glob(path.name + "*") if p.is_file()]  # the file, its -wal and -shm


def texts_of(out: Path) -> str:
    """Everything under ``out`` as text: Parquet decoded (its pages are compressed), the rest raw."""
    parts = []
    for file in out.rglob("*"):
        if file.suffix == ".parquet":
            parts.append(repr(pl.read_parquet(file).to_dicts()))
        elif file.is_file():
            parts.append(file.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


@pytest.mark.slow
def test_a_key_echoed_by_the_server_is_in_no_output_log_or_prefect_record(
    tmp_path, fake_server, prefect_api, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # cli_env passes this environment on
    fake_server.inject("401_echo", times=None, match="Q3")
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(6)), tmp_path / "out"
    args = generate_args(src, fake_server.url, out)

    result = run_cli(args)

    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    # Q3 alone fails at the end, so its endpoint refused every request left: one line either way
    assert len(errors) == 1 and ("1 prompt is still open" in errors[0] or "refuses every request" in errors[0])
    assert "[redacted]" in texts_of(out)  # the echo was stored, masked: the check below is not vacuous
    assert KEY not in texts_of(out) and KEY not in result.stdout + result.stderr
    for db in prefect_database():
        assert KEY.encode() not in db.read_bytes(), db

    fake_server.clear_faults()
    again = run_cli(args)
    assert again.returncode == 0, again.stderr
    assert len(accepted(out)) == 6


@pytest.mark.slow
def test_a_400_every_request_gets_exits_2_with_the_servers_words(tmp_path, fake_server, prefect_api):
    fake_server.inject("400", times=None, match="Q")
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(100)), tmp_path / "out"

    result = run_cli(generate_args(src, fake_server.url, out, "--concurrency", "4"))

    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "every request fails the same way" in errors[0] and "injected 400" in errors[0]
    assert "Traceback" not in result.stderr
