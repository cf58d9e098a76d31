"""generations/ (written by generate): ``accepted/``, ``rejected/`` and ``turns/`` of ``part-*.parquet``.

Declared here once, for every writer, reader and test fixture (docs/stages/generate.md, "The folder:
generations/"); each used to restate it, and one fixture had drifted (``messages`` of two fields
where the writer's have six):

- the columns of each kind (``COLUMNS``, ``schema``: name and type, in the file's order), written
  with ``frame`` and checked with ``schema_problem``;
- the row of each kind, built by one typed function (``accepted_row``, ``rejected_row``,
  ``turn_row``): messages in their stored form (``stored_messages``), tools and tool calls as JSON;
- the sample key (``sample_key``): the prompt's messages and tools plus the settings that make two
  answers to it different samples. Resume, the nightly's reuse of shards and the fixtures take it
  from here; its bytes never change, or every run on disk would be requested again
  (``tests/test_generations_contract.py`` pins them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_core.base import stable_hash
from eagle3_core.contracts import parquet
from eagle3_core.contracts.folder import listed_parts

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

STAGE = "generate"
ACCEPTED, REJECTED, TURNS = "accepted", "rejected", "turns"  # turns/: the earlier turns of generate.turns: all
KINDS = (ACCEPTED, REJECTED, TURNS)

# a stored message: every field present (a Parquet struct is fixed), null where a turn has none
MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning")
TOOL_FIELDS = MESSAGE_FIELDS[2:]

# name -> type, in the file's order ("messages": a list of MESSAGE_FIELDS structs of strings)
ACCEPTED_COLUMNS = (
    ("sample_id", "string"),
    ("messages", "messages"),
    ("reasoning", "string"),
    ("content", "string"),
    ("reasoning_source", "string"),
    ("finish_reason", "string"),
    ("prompt_token_ids", "list<int64>"),  # null: the server sent none (reconstruct takes the text path)
    ("completion_token_ids", "list<int64>"),
    ("model", "string"),
    ("endpoint", "string"),
    ("prompt_tokens", "int64"),
    ("completion_tokens", "int64"),
    ("attempts", "int64"),
    ("latency_s", "float64"),
    ("created_at", "float64"),
    ("tools", "string"),  # JSON: tool definitions vary too much in shape for one Parquet struct
    ("tool_calls", "string"),  # JSON
)
REJECTED_COLUMNS = (
    ("sample_id", "string"),  # null: a malformed row, known by its row index
    ("row_index", "int64"),
    ("input", "string"),  # the input row as JSON text
    ("reason", "string"),
    ("detail", "string"),
)
TURN_COLUMNS = ACCEPTED_COLUMNS + (("conversation_id", "string"), ("turn", "int64"))  # turn: 0-based
COLUMNS = {ACCEPTED: ACCEPTED_COLUMNS, REJECTED: REJECTED_COLUMNS, TURNS: TURN_COLUMNS}


def schema(kind: str) -> dict[str, pl.DataType]:
    """The Polars schema of one kind's shards (the writer's library; name -> type, in order)."""
    import polars as pl

    types = {"string": pl.String, "int64": pl.Int64, "float64": pl.Float64, "list<int64>": pl.List(pl.Int64)}
    types["messages"] = pl.List(pl.Struct({name: pl.String for name in MESSAGE_FIELDS}))
    return {name: types[type_] for name, type_ in COLUMNS[kind]}


def frame(kind: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """One shard's rows as a frame of the contract's columns (an empty one keeps the schema)."""
    import polars as pl

    return pl.DataFrame(rows, schema=schema(kind), orient="row")


def schema_problem(part: str | Path, kind: str) -> str | None:
    """How the shard's columns differ from the contract, or None."""
    import polars as pl

    found, expected = pl.read_parquet_schema(part), schema(kind)
    if list(found) != list(expected):
        return f"{part}: columns {list(found)}, the contract's are {list(expected)}"
    wrong = [f"{name} is {found[name]}, not {type_}" for name, type_ in expected.items() if found[name] != type_]
    return f"{part}: {'; '.join(wrong)}" if wrong else None


# ---- the sample key ----------------------------------------------------------------------------


def sample_key(messages: list[dict[str, Any]], settings: dict, tools: list[dict] | None = None) -> str:
    """The stable key of one sample: its prompt messages as sent (and tools, when it has some) plus
    ``settings``, what makes two answers to it different samples (the served source's sampling key,
    ``GenerateConfig.sampling_key``, or the dataset source's ``{"source": "dataset"}``). 24 hex
    digits of sha256 over canonical JSON: the bytes every run on disk is keyed by."""
    key = {"messages": messages, "sampling": settings}
    if tools:
        key["tools"] = tools
    return stable_hash(key, length=24)


def turn_key(conversation_id: str, turn: int) -> str:
    """The key of one earlier turn's row: its conversation's key and its place."""
    return stable_hash({"conversation": conversation_id, "turn": turn}, length=24)


# ---- rows --------------------------------------------------------------------------------------


def stored_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as a record holds them: every field present (null where not given) and
    ``tool_calls`` as JSON text (arguments vary in shape)."""
    stored = []
    for m in messages:
        calls = m.get("tool_calls")
        stored.append(
            {
                "role": m["role"],
                "content": m["content"],
                "tool_calls": json.dumps(calls, ensure_ascii=False) if calls else None,
                "tool_call_id": m.get("tool_call_id"),
                "name": m.get("name"),
                "reasoning": m.get("reasoning"),
            }
        )
    return stored


def sent_messages(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as they were sent, from a record's stored form (older records: role, content).
    Reasoning goes under both names: vLLM reads ``reasoning``, SGLang ``reasoning_content``."""
    sent = []
    for m in stored:
        message = {"role": m["role"], "content": m["content"]}
        if m.get("tool_calls"):
            message["tool_calls"] = json.loads(m["tool_calls"])
        message |= {k: m[k] for k in TOOL_FIELDS[1:] if m.get(k) is not None}
        if message.get("reasoning"):
            message["reasoning_content"] = message["reasoning"]
        sent.append(message)
    return sent


def _json_or_none(value: Any) -> str | None:
    return None if not value else json.dumps(value, ensure_ascii=False)


def accepted_row(
    *,
    sample_id: str,
    messages: list[dict[str, Any]],
    reasoning: str | None,
    content: str | None,
    reasoning_source: str | None,
    finish_reason: str | None,
    model: str,
    endpoint: str,
    prompt_token_ids: list[int] | None = None,
    completion_token_ids: list[int] | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    attempts: int = 0,
    latency_s: float = 0.0,
    tools: list[dict] | None = None,
    tool_calls: list[dict] | None = None,
    created_at: float | None = None,
) -> dict[str, Any]:
    """One accepted row, in the contract's columns: ``messages`` as sent (stored here), ``tools`` and
    ``tool_calls`` as given (JSON text here), ``created_at`` now unless given."""
    return {
        "sample_id": sample_id,
        "messages": stored_messages(messages),
        "reasoning": reasoning,
        "content": content,
        "reasoning_source": reasoning_source,
        "finish_reason": finish_reason,
        "prompt_token_ids": prompt_token_ids,
        "completion_token_ids": completion_token_ids,
        "model": model,
        "endpoint": endpoint,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "attempts": attempts,
        "latency_s": round(latency_s, 6),
        "created_at": time.time() if created_at is None else created_at,
        "tools": _json_or_none(tools),
        "tool_calls": _json_or_none(tool_calls),
    }


def rejected_row(sample_id: str | None, row_index: int, input_json: str, reason: str, detail: str) -> dict[str, Any]:
    """One rejected row: ``sample_id`` None for a malformed row, ``input_json`` the row as JSON text
    (``chat.rows.row_json``), ``reason`` a short code counted in the manifest, ``detail`` a sentence."""
    return {"sample_id": sample_id, "row_index": row_index, "input": input_json, "reason": reason, "detail": detail}


def turn_row(accepted: dict[str, Any], conversation_id: str, turn: int) -> dict[str, Any]:
    """An earlier turn's row: an accepted row keyed as that turn of its conversation."""
    return accepted | {"sample_id": turn_key(conversation_id, turn), "conversation_id": conversation_id, "turn": turn}


# ---- reading -----------------------------------------------------------------------------------


def accepted_parts(generations_dir: str | Path) -> list[Path]:
    """Every accepted part, in name order (``folder.listed_parts``)."""
    return listed_parts(generations_dir, STAGE, "accepted generation shards", under=ACCEPTED)


def num_rows(part: str | Path) -> int:
    return parquet.num_rows(part, STAGE)


def read(part: str | Path, columns: list[str], optional: tuple[str, ...] = ()) -> pa.Table:
    """``columns`` of one part; those in ``optional`` may be absent (older parts lack some)."""
    return parquet.read_table(part, STAGE, columns, optional)
