"""What the served template does with earlier turns' reasoning, seen in the server's own prompt ids.

``target.history_reasoning`` declares it (drop / keep / interleave), and generate relies on it:
with keep or interleave a history turn's reasoning is sent and rendered, and training on earlier
turns (``history_supervised``) needs it. Templates differ where the issue was found: DeepSeek-V3.2's
encoder and MiniMax-M2's template drop reasoning before the last user message but keep it in the
tool loop after it (interleave); Qwen3's template does the same. So two requests, each with a
distinctive earlier reasoning, at one completion token each (only the prompt is read):

- ``past_reasoning``: an answered turn before the last user message: rendered only under ``keep``;
- ``tool_loop_reasoning``: a tool call of the turn in progress and its result: rendered under
  ``keep`` and ``interleave``.

The rule seen is the one those two findings imply; one that differs from the recipe's is one
``EndpointError`` naming ``target.history_reasoning`` and the value to set.
"""

from __future__ import annotations

from typing import Any

from eagle3_core.errors import EndpointError

PAST = "Two plus two makes four, said the abacus."
LOOP = "The adder tool will sum seventeen and twenty-five."
ADD_TOOL = {  # the pre-flight's one tool, and a call of it (preflight.SUITE's tool round trip too)
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}
CALL = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a":17,"b":25}'}}


def _thought(text: str) -> dict[str, str]:
    return {"reasoning": text, "reasoning_content": text}  # vLLM reads one name, SGLang the other


HISTORY_CASES: dict[str, tuple[list[dict], list[dict] | None, str]] = {
    "past_reasoning": (
        [
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "4.", **_thought(PAST)},
            {"role": "user", "content": "And 3 + 3?"},
        ],
        None,
        PAST,
    ),
    "tool_loop_reasoning": (
        [
            {"role": "user", "content": "Use the tool: what is 17 + 25?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL], **_thought(LOOP)},
            {"role": "tool", "tool_call_id": "call_0", "name": "add", "content": "42"},
        ],
        [ADD_TOOL],
        LOOP,
    ),
}


def rule_seen(past_rendered: bool, loop_rendered: bool | None) -> str:
    """The history rule two observations imply (``loop_rendered`` None: the tool case was not asked)."""
    if past_rendered:
        return "keep"
    return "interleave" if loop_rendered else "drop"


def rendered(tokenizer: Any, prompt_ids: list[int] | None, text: str, url: str, case: str) -> bool:
    """Whether the server's prompt holds ``text``."""
    if not prompt_ids:
        raise EndpointError(
            f"{url} [{case}]: the server returned no prompt ids: what its template does with earlier reasoning "
            "cannot be seen",
            fix="serve with vLLM or SGLang and generate.return_token_ids: true",
        )
    return text in tokenizer.decode(prompt_ids, skip_special_tokens=False)


def check_rule(declared: str, past_rendered: bool, loop_rendered: bool | None, url: str) -> str:
    """The case's note when the served rule is the declared one, else ``EndpointError`` naming the field."""
    seen = rule_seen(past_rendered, loop_rendered)
    if loop_rendered is None and declared == "interleave" and seen == "drop":
        return "earlier reasoning dropped before the last user message (the tool loop was not checked: no tools)"
    if seen != declared:
        where = [
            f"an answered turn's reasoning {'is' if past_rendered else 'is not'} in the server's prompt",
            *(
                [f"a tool call's reasoning in the turn in progress {'is' if loop_rendered else 'is not'}"]
                if loop_rendered is not None
                else []
            ),
        ]
        raise EndpointError(
            f"{url} [history]: the served template's rule for earlier reasoning is {seen!r}, the recipe declares "
            f"target.history_reasoning: {declared} ({'; '.join(where)})",
            fix=f"set target.history_reasoning: {seen} in the recipe (or serve the template the recipe was checked against)",
        )
    return f"earlier reasoning: {seen}, as target.history_reasoning declares"
