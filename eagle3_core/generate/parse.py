"""A chat-completion body -> reasoning, answer and token ids, byte-exact.

Where the reasoning is (DESIGN.md, "What the server can send"):
1. ``message.reasoning`` (vLLM >= 0.16);
2. else ``message.reasoning_content`` (older vLLM, SGLang, llama.cpp, DeepSeek, Moonshot). When a
   server sends both (vLLM 0.11.1-0.15) they hold the same text: take one, never both added;
3. else ``<think>...</think>`` inline in ``content`` (a server without a reasoning parser); an
   unclosed ``<think>`` (cut by ``length``) makes the whole rest reasoning.
Texts are never stripped: a leading space or newline is a token the target emitted.

Where the token ids are (``return_token_ids``), read in this order:
1. vLLM: ``prompt_token_ids`` at the top level, ``choices[0].token_ids``;
2. SGLang: both inside the choice, ``choices[0].prompt_token_ids`` and ``choices[0].token_ids``
   (its ChatCompletionResponseChoice). Several SGLang versions ``.strip()`` the reasoning: the
   text is then not what the target wrote, and only the ids are (reconstruct trains on them).
``message.tool_calls`` is kept as the server parsed it (JSON text in the record).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class MalformedBody(Exception):
    """The body is not a chat completion (truncated JSON, no choices, no message)."""


@dataclass(frozen=True)
class Completion:
    reasoning: str
    content: str
    reasoning_source: str | None  # reasoning | reasoning_content | think_tags | None (no reasoning)
    finish_reason: str | None
    prompt_token_ids: list[int] | None
    completion_token_ids: list[int] | None
    prompt_tokens: int | None
    completion_tokens: int | None
    id_layout: str = "none"  # vllm | sglang | completion_only | none: where the token ids were found
    tool_calls: list[dict] | None = None


def parse_completion(body: Any) -> Completion:
    """Read one non-streaming chat-completion body (already JSON-decoded)."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise MalformedBody("no choices[0].message in the response") from None
    if not isinstance(message, dict):
        raise MalformedBody("choices[0].message is not an object")
    reasoning, content, source = split_reasoning(message)
    usage = body.get("usage") or {}
    prompt_ids, completion_ids, layout = token_ids(body, choice)
    calls = message.get("tool_calls")
    return Completion(
        reasoning=reasoning,
        content=content,
        reasoning_source=source,
        finish_reason=choice.get("finish_reason"),
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        id_layout=layout,
        tool_calls=calls if isinstance(calls, list) and calls else None,
    )


def token_ids(body: dict, choice: dict) -> tuple[list[int] | None, list[int] | None, str]:
    """(prompt ids, completion ids, layout) from vLLM's or SGLang's places (module docstring)."""
    completion = _ids(choice.get("token_ids"))
    if _ids(body.get("prompt_token_ids")) is not None:
        return _ids(body.get("prompt_token_ids")), completion, "vllm"
    if _ids(choice.get("prompt_token_ids")) is not None:
        return _ids(choice.get("prompt_token_ids")), completion, "sglang"
    return None, completion, "completion_only" if completion is not None else "none"


def split_reasoning(message: dict) -> tuple[str, str, str | None]:
    """(reasoning, content, source) of one message, per the order in the module docstring."""
    content = message.get("content")
    content = content if isinstance(content, str) else ""
    for field in ("reasoning", "reasoning_content"):
        value = message.get(field)
        if isinstance(value, str) and value:
            return value, content, field
    if THINK_CLOSE in content:
        head, _, answer = content.partition(THINK_CLOSE)
        _, opened, inside = head.partition(THINK_OPEN)
        return (inside if opened else head), answer, "think_tags"
    if THINK_OPEN in content:
        _, _, inside = content.partition(THINK_OPEN)
        return inside, "", "think_tags"
    return "", content, None


def reasoning_layout(message: dict) -> str:
    """Which field carries the reasoning: reasoning, reasoning_content, both, think_tags or none."""
    present = [f for f in ("reasoning", "reasoning_content") if isinstance(message.get(f), str) and message.get(f)]
    if len(present) == 2:
        return "both"
    if present:
        return present[0]
    _, _, source = split_reasoning(message)
    return source or "none"


def _ids(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return value
    return None
