"""The earlier turns of a conversation inside its last prompt: which tokens are the target's own.

With ``generate.turns: all`` the history of a record is the target's own earlier answers, and with
``target.history_reasoning: keep`` or ``interleave`` the template renders them as the target wrote
them, reasoning included. ``target.history_supervised`` then trains on those turns too: each one's
span of the prompt is found by rendering the conversation up to it twice, ``messages[:j]`` with
the generation prompt (the prompt the target answered) and ``messages[:j + 1]`` without (the same
with its answer); the tokens between the two are the turn's, supervised (1) like an answer. No
family's markers are written here: the template says where a turn starts and ends. A turn whose
two renders are not both prefixes of the prompt (a template that renders a turn differently once
later turns follow) stays masked and is counted, never guessed.

Cost: two renders and encodes per earlier turn, only with the switch on.
"""

from __future__ import annotations

from typing import Any

from eagle3_core.target.tokenizer import encode_batch


def history_spans(
    tokenizer: Any,
    messages: list[dict],
    tools: list[dict] | None,
    kwargs: dict,
    prompt_ids: list[int],
    turn_ends: tuple[int, ...],
) -> tuple[list[tuple[int, int]], int]:
    """The (start, end) span of each earlier answer turn (assistant, no tool calls) in
    ``prompt_ids``, through its last end-of-turn id (``turn_ends``; what the template writes after
    it, a newline, is the template's), and how many such turns could not be placed."""
    turns = [j for j, m in enumerate(messages) if m["role"] == "assistant" and not m.get("tool_calls")]
    texts = []
    for j in turns:
        texts += [
            _render(tokenizer, messages[:j], tools, kwargs, True),
            _render(tokenizer, messages[: j + 1], tools, kwargs, False),
        ]
    ids = encode_batch(tokenizer, texts)
    spans, unplaced = [], 0
    for head, whole in zip(ids[::2], ids[1::2]):
        if len(whole) > len(head) and whole[: len(head)] == head and prompt_ids[: len(whole)] == whole:
            spans.append((len(head), _through_turn_end(whole, len(head), turn_ends)))
        else:
            unplaced += 1
    return spans, unplaced


def _through_turn_end(ids: list[int], start: int, turn_ends: tuple[int, ...]) -> int:
    """The end of the turn in ``ids[start:]``: just after its last end-of-turn id, else all of it."""
    ends = [i for i in range(start, len(ids)) if ids[i] in turn_ends]
    return ends[-1] + 1 if ends else len(ids)


def _render(tokenizer: Any, messages: list[dict], tools: list[dict] | None, kwargs: dict, generation: bool) -> str:
    return tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=generation, **kwargs
    )


def supervised(mask: list[int], spans: list[tuple[int, int]]) -> list[int]:
    """``mask`` with every span set to 1."""
    mask = list(mask)
    for start, end in spans:
        mask[start:end] = [1] * (end - start)
    return mask
