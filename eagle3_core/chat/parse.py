"""A chat-completion body -> reasoning, answer and token ids, byte-exact.

Where the reasoning is (what the servers send, in this order):
1. ``message.reasoning`` (vLLM >= 0.16);
2. else ``message.reasoning_content`` (older vLLM, SGLang, llama.cpp, DeepSeek, Moonshot). When a
   server sends both (vLLM 0.11.1-0.15) they hold the same text: take one, never both added;
3. else ``<think>...</think>`` inline in ``content`` (a server without a reasoning parser); an
   unclosed ``<think>`` (cut by ``length``) makes the whole rest reasoning.
Texts are never stripped: a leading space or newline is a token the target emitted.

Where the token ids are (``return_token_ids``), one layout per server (``ID_LAYOUTS``):
1. ``vllm``: ``prompt_token_ids`` at the top level, ``choices[0].token_ids``;
2. ``sglang``: SGLang 0.5.23 and later, both inside the choice, ``choices[0].prompt_token_ids``
   and ``choices[0].response_token_ids`` (its ChatCompletionResponseChoice; PR 35225 renamed
   ``token_ids``), and ``sglext.output_ids`` (in the choice or the body) where that is all it sent;
3. ``sglang_legacy``: earlier SGLang, ``choices[0].prompt_token_ids`` and ``choices[0].token_ids``.
A layout is named ``prompt_only`` when only prompt ids came (``token_ids: null``, vLLM issue
28246) and ``completion_only`` when only completion ids came; ``none`` when no id field is there.
A body with an id field in none of these places is ``unknown`` (``unknown_id_fields`` names them):
the probe stops on it. Several SGLang versions ``.strip()`` the reasoning: the text is then not
what the target wrote, and only the ids are (reconstruct trains on them).
``message.tool_calls`` is kept as the server parsed it (JSON text in the record).

vLLM >= 0.32 started with ``--per-request-spec-decode-metrics detailed`` (and a drafter) adds a
top-level ``metrics.speculative_decoding`` to each non-streaming answer with ``n == 1``
(``RequestSpecDecodeMetrics.to_dict`` in ``vllm/v1/metrics/stats.py``): kept as ``SpecDecodeSteps``,
one entry per verify step, in order. ``metrics`` is null without the flag, and SGLang sends no such
field: ``spec_decode`` is then None. So is a block without the per-step lists (the ``summary`` level:
its steps cannot be placed in the output) or one whose lists contradict its histogram.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class MalformedBody(Exception):
    """The body is not a chat completion (truncated JSON, no choices, no message)."""


@dataclass(frozen=True)
class SpecDecodeSteps:
    """One answer's verify steps as vLLM counted them: ``accepted[s]`` of ``drafted[s]`` draft tokens
    kept at step s (the target's own bonus token not counted); ``histogram[j]`` steps kept exactly j;
    ``num_spec_tokens`` the k the server drafts at most. No step (k = 0, or a one-token answer): empty."""

    accepted: tuple[int, ...]
    drafted: tuple[int, ...]
    histogram: tuple[int, ...]
    num_spec_tokens: int


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
    id_layout: str = "none"  # vllm | sglang | sglang_legacy | prompt_only | completion_only | unknown | none
    tool_calls: list[dict] | None = None
    fields_disagree: bool = False  # both reasoning fields sent, with different texts (``reasoning`` is read)
    spec_decode: SpecDecodeSteps | None = None  # vLLM's per-request verify steps (module docstring)


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
        fields_disagree=_fields_disagree(message),
        spec_decode=spec_decode_steps(body),
    )


def _fields_disagree(message: dict) -> bool:
    both = [message.get(f) for f in ("reasoning", "reasoning_content")]
    return all(isinstance(text, str) and text for text in both) and both[0] != both[1]


def token_ids(body: dict, choice: dict) -> tuple[list[int] | None, list[int] | None, str]:
    """(prompt ids, completion ids, layout) from vLLM's or SGLang's places (module docstring)."""
    top_prompt, choice_prompt = _ids(body.get("prompt_token_ids")), _ids(choice.get("prompt_token_ids"))
    sglext = choice.get("sglext") if isinstance(choice.get("sglext"), dict) else body.get("sglext")
    output_ids = _ids(sglext.get("output_ids")) if isinstance(sglext, dict) else None
    response = _ids(choice.get("response_token_ids"))
    if response is not None or output_ids is not None:
        return choice_prompt or top_prompt, response if response is not None else output_ids, "sglang"
    completion = _ids(choice.get("token_ids"))
    if top_prompt is not None:
        return top_prompt, completion, "vllm" if completion is not None else "prompt_only"
    if choice_prompt is not None:
        return choice_prompt, completion, "sglang_legacy" if completion is not None else "prompt_only"
    if completion is not None:
        return None, completion, "completion_only"
    return None, None, "unknown" if unknown_id_fields(body, choice) else "none"


def spec_decode_steps(body: dict) -> SpecDecodeSteps | None:
    """``metrics.speculative_decoding``'s steps (module docstring); None where there are none to place."""
    metrics = body.get("metrics")
    block = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(block, dict):
        return None
    histogram, k = _ids(block.get("acceptance_histogram")), block.get("num_spec_tokens")
    if histogram is None or not isinstance(k, int):
        return None
    if not sum(histogram):  # no step ran: vLLM writes the lists only once a step filled them
        return SpecDecodeSteps((), (), tuple(histogram), k)
    accepted, drafted = _ids(block.get("per_step_accepted")), _ids(block.get("per_step_drafted"))
    if accepted is None or drafted is None or len(accepted) != len(drafted):
        return None  # the summary level, or a block cut short
    if len(accepted) != sum(histogram) or [accepted.count(j) for j in range(len(histogram))] != histogram:
        return None  # the lists are not the steps the histogram counts
    return SpecDecodeSteps(tuple(accepted), tuple(drafted), tuple(histogram), k)


# Where the known layouts put ids (module docstring); null values there are "not returned".
KNOWN_ID_FIELDS = {"prompt_token_ids", "token_ids", "response_token_ids", "sglext"}


def unknown_id_fields(body: dict, choice: dict) -> list[str]:
    """The fields that look like token ids but stand where no known layout puts them."""
    found = [f"choices[0].{k}" for k in choice if _looks_like_ids(k, choice[k]) and k not in KNOWN_ID_FIELDS]
    found += [k for k in body if _looks_like_ids(k, body[k]) and k not in KNOWN_ID_FIELDS]
    known_but_odd = [
        f"{where}{k}"
        for where, obj in (("", body), ("choices[0].", choice))
        for k in ("prompt_token_ids", "token_ids", "response_token_ids")
        if obj.get(k) is not None and _ids(obj.get(k)) is None
    ]
    return found + known_but_odd


def _looks_like_ids(key: str, value: Any) -> bool:
    return key.endswith("_ids") and value is not None


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
