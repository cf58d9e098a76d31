"""Generation records and shards as the generate stage writes them (``contracts.generations``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eagle3_core.contracts import generations


def record(
    sample_id: str,
    messages: list[dict[str, Any]],
    reasoning: str,
    content: str,
    *,
    finish_reason: str = "stop",
    prompt_token_ids: list[int] | None = None,
    completion_token_ids: list[int] | None = None,
    tools: str | None = None,
    tool_calls: str | None = None,
) -> dict[str, Any]:
    """An accepted row built by the contract. ``messages`` as sent or as stored (a golden file keeps
    the stored form), ``tools`` and ``tool_calls`` as the JSON text a record holds."""
    return generations.accepted_row(
        sample_id=sample_id,
        messages=[_as_sent(m) for m in messages],
        reasoning=reasoning,
        content=content,
        reasoning_source="reasoning",
        finish_reason=finish_reason,
        model="test",
        endpoint="http://127.0.0.1:0/v1",
        prompt_token_ids=prompt_token_ids,
        completion_token_ids=completion_token_ids,
        prompt_tokens=0,
        completion_tokens=0,
        attempts=1,
        tools=json.loads(tools) if tools else None,
        tool_calls=json.loads(tool_calls) if tool_calls else None,
        created_at=0.0,
    )


def _as_sent(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message (tool calls as JSON text) as it was sent; one as sent stays as it is."""
    return generations.sent_messages([message])[0] if isinstance(message.get("tool_calls"), str) else message


def write_generations(gen_dir: Path, records: list[dict[str, Any]], shard_rows: int = 1000) -> Path:
    """``gen_dir/accepted/part-*.parquet`` holding ``records`` (plus an empty rejected/ folder), of the
    contract's columns."""
    (gen_dir / generations.ACCEPTED).mkdir(parents=True, exist_ok=True)
    (gen_dir / generations.REJECTED).mkdir(parents=True, exist_ok=True)
    for i, start in enumerate(range(0, len(records), shard_rows)):
        rows = records[start : start + shard_rows]
        generations.frame(generations.ACCEPTED, rows).write_parquet(gen_dir / "accepted" / f"part-{i:05d}.parquet")
    return gen_dir
