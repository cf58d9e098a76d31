"""What the text path may decide from a record's text alone, from the recipe's declarations.

A record without the server's ids is rebuilt from its texts only where the texts show every
token the target wrote (CONTRIBUTING.md, "Reconstruction never invents or drops a token"). The
recipe says where they cannot, and each such record is a counted reject under its own reason:

- ``stripped_reasoning_without_ids``: the server's reasoning parser strips whitespace
  (``target.parser_strips_whitespace``: Kimi on vLLM >= 0.25, GLM, MiniMax): the reasoning text
  is not what the target wrote;
- ``thinking_state_unknown``: the prompt does not show whether the target thinks (no forced
  think-open, no closed block), and the recipe's thinking switch has no default the request
  settled (``target.thinking.default: null``, a hybrid model that decides itself);
- ``think_open_not_shown``: the target may or may not write its own ``<think>``
  (``target.think_open_always_written: false``: DeepSeek-R1's January template, after a tool
  output), and a parser files the reasoning the same either way.

With ids none of this matters: the ids decide, and the text is only their check.
"""

from __future__ import annotations

from eagle3_core.target import ChatSettings, TargetConfig


def thinking_state(target: TargetConfig, chat: ChatSettings) -> bool | None:
    """Whether the request had the target think: its switch as sent, else the template's default;
    True for a reasoning target without a switch; None when the model decides."""
    switch = target.thinking
    if switch is None:
        return target.is_reasoning_model
    value = chat.chat_template_kwargs.get(switch.kwarg, switch.default)
    return None if value is None else bool(value)


def undecidable(target: TargetConfig, chat: ChatSettings, reasoning: str, forced: bool) -> tuple[str, str] | None:
    """(reason, detail) when the text of a record without ids cannot decide its tokens, else None.
    ``forced``: the rendered prompt ends with the think-open marker."""
    if target.parser_strips_whitespace and reasoning:
        return (
            "stripped_reasoning_without_ids",
            "the recipe says the server's reasoning parser strips whitespace "
            "(target.parser_strips_whitespace), so the reasoning text is not what the target wrote; "
            "generate with return_token_ids",
        )
    if forced:
        return None
    if thinking_state(target, chat) is None:
        return (
            "thinking_state_unknown",
            f"the prompt does not show whether the target thinks and target.chat.chat_template_kwargs does "
            f"not set {target.thinking.kwarg!r} (the template leaves it to the model); generate with "
            "return_token_ids, or set the switch",
        )
    if not target.think_open_always_written and reasoning:
        return (
            "think_open_not_shown",
            "the target may skip its own think-open (target.think_open_always_written: false) and the "
            "reasoning text reads the same either way; generate with return_token_ids",
        )
    return None
