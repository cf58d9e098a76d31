"""Small builders shared by the generate tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.generate.config import GenerateConfig


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def prompts(n: int, prefix: str = "Q") -> list[dict]:
    return [{"prompt": f"{prefix}{i}"} for i in range(n)]


def config(source: Path | str, urls: list[str], **overrides: Any) -> GenerateConfig:
    """A config for fast tests: no backoff sleeps, small shards."""
    fields = {
        "prompts": PromptSource(input=str(source)),
        "base_urls": urls,
        "concurrency": 8,
        "retry_initial_wait": 0.0,
        "max_retries": 3,
        "request_timeout": 10.0,
        "shard_rows": 10,
    }
    max_samples = overrides.pop("max_samples", None)
    if max_samples is not None:
        fields["prompts"] = PromptSource(input=str(source), max_samples=max_samples)
    return GenerateConfig(**(fields | overrides))


def accepted(out: Path) -> pl.DataFrame:
    files = sorted((out / "accepted").glob("part-*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame()


def rejected(out: Path) -> pl.DataFrame:
    files = sorted((out / "rejected").glob("part-*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame()


class Recorder:
    """A Reporter that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.updates: list[tuple[int, int | None, dict]] = []

    def progress(self, stage: str, done: int, total: int | None, **figures: Any) -> None:
        self.updates.append((done, total, figures))

    def log(self, message: str) -> None:
        self.lines.append(message)


def toy_vllm_config(toy_vllm: Any, source: Path | str, **overrides: Any) -> GenerateConfig:
    """Greedy answers from the toy target that vLLM serves (the integration tests')."""
    fields = {
        "prompts": PromptSource(input=str(source)),
        "base_urls": [toy_vllm.base_url],
        "model": toy_vllm.model,
        "max_tokens": 128,
        "temperature": 0.0,
        "request_timeout": 120,
        "max_retries": 2,
        "shard_rows": 10,
    }
    return GenerateConfig(**(fields | overrides))


class Interrupting(Recorder):
    """Ctrl-C once ``after`` rows are done (once, as the terminal delivers it, mid-run)."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.sent = after, False

    def progress(self, stage, done, total, **figures) -> None:
        super().progress(stage, done, total, **figures)
        if done >= self.after and not self.sent:
            self.sent = True
            raise KeyboardInterrupt
