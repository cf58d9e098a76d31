"""One input row -> the prompt messages to send, or the reason it cannot be sent.

Accepted shapes (DESIGN.md): ``messages`` (OpenAI role/content), ``conversations`` (ShareGPT
from/value: human/user, gpt/assistant, system) and ``prompt`` (a string). Trailing assistant
turns are dropped: the target regenerates them. Anything else is a ``RowRejection`` with a
short reason code; normalising never raises.

A row may carry ``tools`` (OpenAI function definitions): they are sent with the request, so the
server renders its template with them, and kept in the record, so reconstruct renders the same
prompt. They are part of the sample's key: the same prompt with other tools is another sample.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eagle3_core.base import stable_hash
from eagle3_core.generate.inputs import BAD_LINE

SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
}
OPENAI_ROLES = {"system", "user", "assistant", "developer", "tool"}

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class RowRejection:
    reason: str  # short code, counted per code in the manifest
    detail: str  # one human sentence


def normalize(row: Any) -> Messages | RowRejection:
    """The prompt messages of ``row`` (ending with a user turn) or why there are none."""
    if not isinstance(row, dict):
        return RowRejection("unknown_shape", f"a row must be an object, got {type(row).__name__}")
    if BAD_LINE in row:
        return RowRejection(row[BAD_LINE]["reason"], row[BAD_LINE]["detail"])
    if row.get("messages") is not None:
        messages = _from_pairs(row["messages"], "role", "content", None)
    elif row.get("conversations") is not None:
        messages = _from_pairs(row["conversations"], "from", "value", SHAREGPT_ROLES)
    elif "prompt" in row:
        messages = _from_prompt(row["prompt"])
    else:
        keys = ", ".join(sorted(map(str, row))) or "none"
        return RowRejection(
            "unknown_shape", f"expected a `messages`, `conversations` or `prompt` field; got keys: {keys}"
        )
    return messages if isinstance(messages, RowRejection) else _trim(messages)


def normalize_prompt(row: Any) -> tuple[Messages, list[dict] | None] | RowRejection:
    """The prompt messages of ``row`` and its tools (None when it has none), or why it cannot be
    sent; a rejected row read from a jsonl line says which (``in.jsonl line 7: ...``)."""
    found = _prompt_and_tools(row)
    where = getattr(row, "where", "")
    if isinstance(found, RowRejection) and where and not found.detail.startswith(where):
        return RowRejection(found.reason, f"{where}: {found.detail}")
    return found


def _prompt_and_tools(row: Any) -> tuple[Messages, list[dict] | None] | RowRejection:
    messages = normalize(row)
    if isinstance(messages, RowRejection):
        return messages
    tools = row.get("tools")
    if tools is None or tools == []:
        return messages, None
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
        for t in tools
    ):
        return RowRejection(
            "invalid_tools", "`tools` must be a list of {type: function, function: {name, ...}} objects"
        )
    return messages, tools


def _from_prompt(prompt: Any) -> Messages | RowRejection:
    if not isinstance(prompt, str):
        return RowRejection("non_string_content", f"`prompt` must be a string, got {type(prompt).__name__}")
    return [{"role": "user", "content": prompt}]


def _from_pairs(turns: Any, role_key: str, text_key: str, roles: dict[str, str] | None) -> Messages | RowRejection:
    if not isinstance(turns, list):
        return RowRejection("unknown_shape", f"the conversation must be a list of turns, got {type(turns).__name__}")
    messages: Messages = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or role_key not in turn or text_key not in turn:
            return RowRejection("unknown_shape", f"turn {i} must be an object with `{role_key}` and `{text_key}`")
        role = turn[role_key]
        role = roles.get(role) if roles is not None else (role if role in OPENAI_ROLES else None)
        if role is None:
            return RowRejection("unknown_role", f"turn {i} has an unknown role {turn[role_key]!r}")
        content = turn[text_key]
        if not isinstance(content, str):
            return RowRejection(
                "non_string_content", f"turn {i} content must be a string, got {type(content).__name__}"
            )
        messages.append({"role": role, "content": content})
    return messages


def _trim(messages: Messages) -> Messages | RowRejection:
    """Drop trailing assistant turns; what is left must end with a non-empty user turn."""
    while messages and messages[-1]["role"] == "assistant":
        messages = messages[:-1]
    if not messages or messages[-1]["role"] != "user":
        return RowRejection("empty_prompt", "no user turn to answer")
    if not messages[-1]["content"].strip():
        return RowRejection("empty_prompt", "the last user turn is empty")
    return messages


def sample_id(messages: Messages, sampling_key: dict, tools: list[dict] | None = None) -> str:
    """The stable key of one sample: its prompt messages (and tools, when it has some) plus the
    sampling settings."""
    key = {"messages": messages, "sampling": sampling_key}
    if tools:
        key["tools"] = tools
    return stable_hash(key, length=24)


def row_json(row: Any) -> str:
    """The input row as JSON text for a rejected record (values JSON cannot hold become strings);
    a line that was not JSON is kept as it was."""
    if isinstance(row, dict) and set(row) == {BAD_LINE}:
        return row[BAD_LINE]["text"]
    return json.dumps(row, ensure_ascii=False, default=str)
