"""``generate.turns: all``: a conversation regenerated turn by turn, on the target's own answers.

The turns: in a conversation's prompt (its messages through the last user or tool turn, as
``chat.rows.normalize`` gives them), every assistant turn without tool calls is written again by the
target, in order, and the final answer is the last turn. Turn k is sent with the messages before
it, where each earlier regenerated turn is the target's own answer: its content, its tool calls and
its reasoning (under both names, as ``chat.rows`` sends a dataset's), which the server's template keeps,
interleaves or drops as the family does (``target.history_reasoning`` declares which), so the
prompt is what the target sees serving an agent that sends its answers back. An assistant turn
that calls tools stays the dataset's: the tool results after it answer those calls, and no tool
can be run again here.

On disk (docs/stages/generate.md, "Multi-turn rows"):
- the final answer is the conversation's one accepted (or rejected) record, keyed by
  ``contracts.generations.sample_key`` of the row's prompt with ``turns: all`` in the sampling key, so a ``last``
  run never takes it and it never takes a ``last`` run's; its ``messages`` hold the history the
  target wrote;
- each earlier turn is a row of ``turns/part-*.parquet`` (``generations.turn_row``: the accepted
  columns plus ``conversation_id`` and ``turn``, 0-based), buffered and written like the other shards. It is
  the conversation's checkpoint: a killed run resumes an unfinished conversation from its latest
  durable turn (that row's messages plus its answer are the whole history so far), so no durable
  turn is requested again and none is written twice. Rows of conversations this run does not
  have leave at finish, as accepted rows do.

Cost: a conversation of n answer turns is n requests, one after another (each needs the answer
before it); other conversations fill the endpoints meanwhile. Memory: the latest turn of each
unfinished conversation is read at resume (a killed run leaves at most its window of them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_core.chat.rows import Messages
from eagle3_core.contracts.generations import TURNS, sent_messages
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.keys import key64
from eagle3_core.stages.generate.shards import RowShardWriter, shard_files

RESUME_COLUMNS = ("conversation_id", "turn", "messages", "content", "reasoning", "tool_calls")  # read at resume


def turn_points(messages: Messages) -> list[int]:
    """Where each turn the target writes stands in ``messages``: the index of every assistant turn
    without tool calls, then ``len(messages)`` (the final answer, after the last user/tool turn)."""
    points = [i for i, m in enumerate(messages) if m["role"] == "assistant" and not m.get("tool_calls")]
    return points + [len(messages)]


def own_turn(content: str | None, reasoning: str | None, tool_calls: list | None) -> dict[str, Any]:
    """The target's answer as a history turn: what the next request sends back."""
    message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning:  # both names, as rows.py sends a dataset's (vLLM reads one, SGLang the other)
        message |= {"reasoning": reasoning, "reasoning_content": reasoning}
    return message


@dataclass(frozen=True)
class Progress:
    """How far a conversation got: ``done`` turns written, ``history`` the messages through the
    latest of them (the target's own answers in it)."""

    done: int = 0
    history: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Conversation:
    """One row's turns and where a resumed run picks them up."""

    messages: Messages  # the row's prompt, the dataset's earlier answers in it
    points: tuple[int, ...]
    start: Progress = Progress()

    def prompt(self, turn: int, history: list[dict[str, Any]]) -> Messages:
        """The messages turn ``turn`` is sent with: the history so far, then the dataset's turns
        between the previous regenerated turn and this one (user and tool turns, tool calls)."""
        begin = self.points[turn - 1] + 1 if turn else 0
        return history + self.messages[begin : self.points[turn]]


StoreTurn = Callable[[Conversation, int, Messages, Any], Awaitable[None]]


async def answer_turns(conversation: Conversation, ask: Callable, store: StoreTurn) -> tuple[Any, Messages]:
    """Every turn from where the conversation stopped: each earlier one answered and stored
    (``store``) before the next is sent; returns the final answer and the messages it answered."""
    history = list(conversation.start.history)
    last = len(conversation.points) - 1
    for turn in range(conversation.start.done, last):
        prompt = conversation.prompt(turn, history)
        answer = await ask(prompt)
        await store(conversation, turn, prompt, answer)
        c = answer.completion
        history = prompt + [own_turn(c.content, c.reasoning, c.tool_calls)]
    prompt = conversation.prompt(last, history)
    return await ask(prompt), prompt


class TurnBook:
    """The ``turns/`` folder of one run: its writer, the resumed progress of unfinished
    conversations, and the drop of rows no conversation of this run owns."""

    def __init__(self, out_dir: Path, cfg: GenerateConfig) -> None:
        self.active = cfg.turns == "all"  # with `last` the book only drops what an `all` run left
        self.directory = out_dir / TURNS
        self.files = shard_files(self.directory)  # what earlier runs left
        self.writer = RowShardWriter(self.directory, TURNS, cfg.shard_rows, cfg.flush_seconds) if self.active else None
        self.resumed: dict[int, Progress] = {}

    def scan(self, finished: Callable[[int], bool]) -> int:
        """Read the latest durable turn of each conversation not ``finished`` (by key64); returns
        how many turns that saves."""
        import polars as pl

        for file in self.files if self.active else ():
            frame = pl.read_parquet(file, columns=list(RESUME_COLUMNS))
            for row in frame.iter_rows(named=True):
                key = key64(row["conversation_id"])
                if finished(key) or row["turn"] < self.resumed.get(key, Progress()).done:
                    continue
                self.resumed[key] = _progress(row)
        return sum(p.done for p in self.resumed.values())

    def conversation(self, conversation_id: str, messages: Messages) -> Conversation | None:
        """The turns of one row's prompt (None with `last`: the row is one request)."""
        if not self.active:
            return None
        start = self.resumed.get(key64(conversation_id), Progress())
        return Conversation(messages, tuple(turn_points(messages)), start)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def drop_stale(self, current: Callable[[int], bool]) -> int:
        """Rows of ``turns/`` whose conversation is not ``current`` leave (rewritten atomically)."""
        import polars as pl

        from eagle3_core.run.fsio import atomic_path

        dropped = 0
        for file in self.files:
            frame = pl.read_parquet(file)
            keep = pl.Series([current(key64(c)) for c in frame["conversation_id"]], dtype=pl.Boolean)
            if keep.all():
                continue
            dropped += len(keep) - int(keep.sum())
            if not keep.any():
                file.unlink()
                continue
            with atomic_path(file, record=True) as tmp:
                frame.filter(keep).write_parquet(tmp, compression="zstd", statistics=False)
        return dropped


def _progress(row: dict[str, Any]) -> Progress:
    """A stored turn as progress: its messages, then its answer as the target's own history turn."""
    import json

    calls = json.loads(row["tool_calls"]) if row["tool_calls"] else None
    history = sent_messages(row["messages"]) + [own_turn(row["content"], row["reasoning"], calls)]
    return Progress(row["turn"] + 1, tuple(history))
