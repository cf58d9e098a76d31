"""One input row -> its own final assistant turn as an answer (``generate.source: dataset``).

The answer is the row's last turn when that turn is the assistant's (``messages`` role
``assistant``, or a ShareGPT ``conversations`` turn from ``gpt``/``assistant``/...). Its reasoning
is read where such datasets put it, in this order:

1. a ``reasoning_content`` (or ``reasoning``) field on that turn, as DeepSeek- and Moonshot-style
   exports write it, else the same field on the row itself;
2. else inline ``<think>...</think>`` in the turn's text (``chat.parse.split_reasoning``, the rule the
   served path applies to a server without a reasoning parser).

Texts are kept byte-exact, as the served path keeps them. A row whose last turn is not an
assistant's (a bare ``prompt``, a conversation ending with the user) has no answer: a
``RowRejection`` with reason ``no_assistant_turn``. A turn with a second reasoning block
(``<think>A</think>mid<think>B</think>answer``, or a reasoning field beside think tags in its
text) is ``two_reasoning_blocks``: split at the first block, the second would be supervised as
answer text, tags and all, which no served answer holds. Normalising never raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_core.chat.parse import THINK_CLOSE, THINK_OPEN, split_reasoning
from eagle3_core.chat.rows import SHAREGPT_ROLES, RowRejection

NO_ANSWER = "no_assistant_turn"
TWO_BLOCKS = "two_reasoning_blocks"
# What the run's one error names when no row has an answer at all.
LOOKED_FOR = "final assistant turn (`messages[-1].role: assistant` or `conversations[-1].from: gpt`)"
REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(frozen=True)
class DatasetAnswer:
    reasoning: str
    content: str
    reasoning_source: str | None  # reasoning_content | reasoning | think_tags | None (no reasoning)
    tool_calls: list[dict] | None


def dataset_answer(row: Any) -> DatasetAnswer | RowRejection:
    """The row's final assistant turn as an answer, or why it has none."""
    turn = _final_assistant_turn(row)
    if turn is None:
        return RowRejection(NO_ANSWER, f"the row has no {LOOKED_FOR} to take as the answer")
    text = turn.get("content", turn.get("value"))
    calls = turn.get("tool_calls") or None
    if not isinstance(text, str) and not (text is None and calls):
        return RowRejection("non_string_content", f"the final assistant turn's text is {type(text).__name__}")
    message = {"content": text or "", **_reasoning_fields(row, turn)}
    reasoning, content, source = split_reasoning(message)
    if (why := _second_block(reasoning, content, source)) is not None:
        return RowRejection(TWO_BLOCKS, why)
    return DatasetAnswer(reasoning, content, source, calls if isinstance(calls, list) else None)


def _second_block(reasoning: str, content: str, source: str | None) -> str | None:
    """Why the turn holds more than one reasoning block, or None. Once the first block is split
    off, a think tag left in the answer (or inside inline reasoning: a nested ``<think>``) opens or
    closes a second one. A reasoning field's own text is the dataset's to word."""
    texts = {"answer": content, "reasoning": reasoning if source == "think_tags" else ""}
    found = [(tag, part) for part, text in texts.items() for tag in (THINK_OPEN, THINK_CLOSE) if tag in text]
    if not found:
        return None
    tag, part = found[0]
    first = "its first <think> block" if source == "think_tags" else f"its `{source}` field"
    return (
        f"the final assistant turn holds a second reasoning block ({tag} in its {part}, beside {first}); "
        "split at the first, the rest would be trained on as answer text: keep one block, or drop the row"
    )


def has_answer(row: Any) -> bool:
    return _final_assistant_turn(row) is not None


def _final_assistant_turn(row: Any) -> dict | None:
    if not isinstance(row, dict):
        return None
    if isinstance(row.get("messages"), list) and row["messages"]:
        last = row["messages"][-1]
        return last if isinstance(last, dict) and last.get("role") == "assistant" else None
    if isinstance(row.get("conversations"), list) and row["conversations"]:
        last = row["conversations"][-1]
        return last if isinstance(last, dict) and SHAREGPT_ROLES.get(last.get("from")) == "assistant" else None
    return None


def _reasoning_fields(row: dict, turn: dict) -> dict[str, str]:
    """The turn's reasoning field, else the row's (some exports keep it beside the conversation)."""
    for holder in (turn, row):
        for field in REASONING_FIELDS:
            if isinstance(holder.get(field), str) and holder[field]:
                return {field: holder[field]}
    return {}
