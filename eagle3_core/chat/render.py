"""A record's stored messages -> the messages the chat template sees, as the server passes them.

vLLM (``renderers/chat_utils.py``, ``_postprocess_messages``) and SGLang (``serving_chat.py``)
parse an assistant turn's tool-call ``arguments`` string into an object before the template
renders it: Qwen3 and Kimi then write ``{"city": "Paris"}`` (``tojson``'s spacing) where the
string would give ``{"city":"Paris"}``, and Llama-3.1 would JSON-encode the string a second time.
A null ``content`` (OpenAI's, beside tool calls) is rendered as empty text. The rules are vLLM's: an empty or missing ``arguments`` becomes ``{}``, and so does one that is
not JSON or not a JSON object (vLLM coerces rather than fail the whole conversation).
"""

from __future__ import annotations

import json
from typing import Any

from eagle3_core.chat.rows import Messages
from eagle3_core.contracts.generations import sent_messages


def server_messages(stored: list[dict[str, Any]]) -> Messages:
    """The messages of a record as the server hands them to its template."""
    messages = sent_messages(stored)
    for message in messages:
        if message["content"] is None:  # OpenAI's null beside tool calls; vLLM renders it as empty text
            message["content"] = ""
        if message["role"] == "assistant" and message.get("tool_calls"):
            message["tool_calls"] = [_parsed_call(call) for call in message["tool_calls"]]
    return messages


def _parsed_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    function["arguments"] = parsed_arguments(function.get("arguments"))
    return {**call, "function": function}


def parsed_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as an object, by vLLM's rules (module docstring)."""
    if isinstance(arguments, dict):
        return arguments
    if not arguments:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return {}
    return arguments if isinstance(arguments, dict) else {}
