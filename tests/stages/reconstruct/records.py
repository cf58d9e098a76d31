"""Generation records and shards as the generate stage writes them (CONTRIBUTING.md contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("reasoning", pa.string()),
        ("content", pa.string()),
        ("reasoning_source", pa.string()),
        ("finish_reason", pa.string()),
        ("prompt_token_ids", pa.list_(pa.int64())),
        ("completion_token_ids", pa.list_(pa.int64())),
        ("model", pa.string()),
        ("endpoint", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("attempts", pa.int64()),
        ("latency_s", pa.float64()),
        ("created_at", pa.float64()),
        ("tools", pa.string()),
        ("tool_calls", pa.string()),
    ]
)


def record(
    sample_id: str,
    messages: list[dict[str, str]],
    reasoning: str,
    content: str,
    *,
    finish_reason: str = "stop",
    prompt_token_ids: list[int] | None = None,
    completion_token_ids: list[int] | None = None,
    tools: str | None = None,
    tool_calls: str | None = None,
) -> dict[str, Any]:
    return {
        "sample_id": sample_id,
        "messages": messages,
        "reasoning": reasoning,
        "content": content,
        "reasoning_source": "reasoning",
        "finish_reason": finish_reason,
        "prompt_token_ids": prompt_token_ids,
        "completion_token_ids": completion_token_ids,
        "model": "test",
        "endpoint": "http://127.0.0.1:0/v1",
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "attempts": 1,
        "latency_s": 0.0,
        "created_at": 0.0,
        "tools": tools,
        "tool_calls": tool_calls,
    }


def write_generations(gen_dir: Path, records: list[dict[str, Any]], shard_rows: int = 1000) -> Path:
    """``gen_dir/accepted/part-*.parquet`` holding ``records`` (plus an empty rejected/ folder)."""
    (gen_dir / "accepted").mkdir(parents=True, exist_ok=True)
    (gen_dir / "rejected").mkdir(parents=True, exist_ok=True)
    for i, start in enumerate(range(0, len(records), shard_rows)):
        rows = records[start : start + shard_rows]
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        pq.write_table(table, gen_dir / "accepted" / f"part-{i:05d}.parquet")
    return gen_dir
