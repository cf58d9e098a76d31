"""One input row -> the prompt messages to send, or the reason it cannot be sent.

Accepted shapes: ``messages`` (OpenAI role/content), ``conversations`` (ShareGPT
from/value: human/user, gpt/assistant, system) and ``prompt`` (a string). Trailing assistant
turns are dropped: the target regenerates them. Anything else is a ``RowRejection`` with a
short reason code; normalising never raises.

A row may carry ``tools`` (OpenAI function definitions): they are sent with the request, so the
server renders its template with them, and kept in the record, so reconstruct renders the same
prompt. They are part of the sample's key (``contracts.generations.sample_key``): the same prompt
with other tools is another sample.

An agent's history keeps its tool use (OpenAI ``messages`` only): an earlier assistant turn's
``tool_calls`` (its ``content`` may then be null) and a tool turn's ``tool_call_id`` and ``name``
are sent as given, since the template renders them into the prompt. A prompt may end with a tool
turn: the target answers the tool's result. An earlier assistant turn's reasoning (``reasoning``
or ``reasoning_content``) is kept too and sent under both names (vLLM reads ``reasoning``, SGLang
``reasoning_content``): templates with interleaved thinking (MiniMax-M2, GLM, Kimi-K2-Thinking)
render it into the history, the others drop it (``target.history_reasoning``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eagle3_core.prompts.inputs import BAD_LINE

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

Messages = list[dict[str, Any]]  # role, content; tool_calls / tool_call_id / name where given
ANSWERED_ROLES = ("user", "tool")  # the turns a prompt may end with


@dataclass(frozen=True)
class RowRejection:
    reason: str  # short code, counted per code in the manifest
    detail: str  # one human sentence


def normalize(row: Any) -> Messages | RowRejection:
    """The prompt messages of ``row`` (ending with a user or tool turn) or why there are none."""
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
        tools = None
    elif not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
        for t in tools
    ):
        return RowRejection(
            "invalid_tools", "`tools` must be a list of {type: function, function: {name, ...}} objects"
        )
    if (surrogate := _lone_surrogate([messages, tools])) is not None:
        return RowRejection(
            "undecodable", f"the text holds {surrogate}, half of a UTF-16 pair: no UTF-8 request or record can carry it"
        )
    return messages, tools


def _lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in ``value``'s text, as its escape, or None. JSON allows an escape
    such as ``\\ud83d`` (half an emoji, common in scraped chats), which no UTF-8 text holds: the
    sample key, the request and the Parquet record would each fail to encode it."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"\\u{ord(text[exc.start]):04x}"
    return None


def _from_prompt(prompt: Any) -> Messages | RowRejection:
    if not isinstance(prompt, str):
        return RowRejection("non_string_content", f"`prompt` must be a string, got {type(prompt).__name__}")
    return [{"role": "user", "content": prompt}]


def _from_pairs(turns: Any, role_key: str, text_key: str, roles: dict[str, str] | None) -> Messages | RowRejection:
    if not isinstance(turns, list):
        return RowRejection("unknown_shape", f"the conversation must be a list of turns, got {type(turns).__name__}")
    messages: Messages = []
    for i, turn in enumerate(turns):
        calls = turn.get("tool_calls") if roles is None and isinstance(turn, dict) else None
        calls = None if calls == [] else calls  # an empty list is no calls (some exports write one on every turn)
        if not isinstance(turn, dict) or role_key not in turn or (text_key not in turn and calls is None):
            return RowRejection("unknown_shape", f"turn {i} must be an object with `{role_key}` and `{text_key}`")
        role = turn[role_key]
        role = roles.get(role) if roles is not None else (role if role in OPENAI_ROLES else None)
        if role is None:
            return RowRejection("unknown_role", f"turn {i} has an unknown role {turn[role_key]!r}")
        content = turn.get(text_key)
        if calls is not None:
            if problem := _tool_calls_problem(role, calls):
                return RowRejection("invalid_tool_calls", f"turn {i}: {problem}")
            content = "" if content is None else content  # OpenAI's null content beside tool calls
        if not isinstance(content, str):
            return RowRejection(
                "non_string_content", f"turn {i} content must be a string, got {type(content).__name__}"
            )
        messages.append({"role": role, "content": content} | _tool_fields(role, turn, calls))
    return messages


def _tool_calls_problem(role: str, calls: Any) -> str | None:
    """Why ``calls`` is not an assistant turn's OpenAI ``tool_calls``, or None."""
    if role != "assistant":
        return f"only an assistant turn calls tools, not a {role} turn"
    if not isinstance(calls, list) or not all(
        isinstance(c, dict)
        and isinstance(c.get("function"), dict)
        and isinstance(c["function"].get("name"), str)
        and isinstance(c["function"].get("arguments", ""), str | dict)
        for c in calls
    ):
        return "`tool_calls` must be a list of {function: {name, arguments}} objects"
    return None


def _tool_fields(role: str, turn: dict, calls: list | None) -> dict[str, Any]:
    """The tool-use and reasoning fields of an OpenAI turn that the template renders (only those given)."""
    fields: dict[str, Any] = {"tool_calls": calls} if calls else {}
    reasoning = turn.get("reasoning") or turn.get("reasoning_content")
    if role == "assistant" and isinstance(reasoning, str) and reasoning:
        fields |= {"reasoning": reasoning, "reasoning_content": reasoning}
    if role == "tool":
        fields |= {k: turn[k] for k in ("tool_call_id", "name") if isinstance(turn.get(k), str)}
    return fields


def _trim(messages: Messages) -> Messages | RowRejection:
    """Drop trailing assistant turns; what is left must end with a non-empty user turn or a tool
    turn (an agent's history: the target answers the tool's result)."""
    while messages and messages[-1]["role"] == "assistant":
        messages = messages[:-1]
    if not messages or messages[-1]["role"] not in ANSWERED_ROLES:
        return RowRejection("empty_prompt", "no user or tool turn to answer")
    if messages[-1]["role"] == "user" and not messages[-1]["content"].strip():
        return RowRejection("empty_prompt", "the last user turn is empty")
    return messages


def has_past_tool_calls(messages: Messages) -> bool:
    """Whether an earlier assistant turn calls a tool (a tool loop): what a template that cannot render a call
    as the server hands it (``target.renders_past_tool_calls: false``) fails on."""
    return any(m.get("tool_calls") for m in messages)


def row_json(row: Any) -> str:
    """The input row as JSON text for a rejected record (values JSON cannot hold become strings);
    a line that was not JSON is kept as it was."""
    if isinstance(row, dict) and set(row) == {BAD_LINE}:
        return row[BAD_LINE]["text"]
    text = json.dumps(row, ensure_ascii=False, default=str)
    if _lone_surrogate(text) is not None:  # escaped, so the record can be written
        return json.dumps(row, default=str)
    return text
