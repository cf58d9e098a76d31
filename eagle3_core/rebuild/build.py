"""A batch of generation records -> training rows, rejects and server-id mismatches.

Never raises for a bad record: each one ends as a row or as a reject with a reason code
(counted per code in the manifest). The configuration errors that would reject every record
(a tokenizer without the think tokens, ids that disagree with the recipe) are caught before,
in ``tokenizer.token_facts``.

Cost: one template render per record (Jinja, in Python) and ONE batched encode of all the
prompt, reasoning and content texts of the batch (Rust), so reconstruction runs close to the
tokenizer's own batched speed (benchmarks/reconstruct.md).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from eagle3_core.chat.render import server_messages
from eagle3_core.rebuild.history import history_spans, supervised
from eagle3_core.rebuild.layout import (
    Sequence,
    ThinkMarks,
    first_difference,
    forced_think_position,
    masked,
    output_ids,
    repeated_think_closes,
    think_closed_in_prompt,
    think_marks,
)
from eagle3_core.rebuild.text_rules import server_ids_missing, server_renders_prompt, undecidable
from eagle3_core.target.config import ChatSettings, TargetConfig
from eagle3_core.target.tokenizer import TokenFacts, encode_batch

# How many ids around a mismatch are kept to show what differs.
MISMATCH_CONTEXT = 4


@dataclass
class BatchResult:
    """Columns of the sequences/ shard plus everything counted on the way."""

    rows: dict[str, list] = field(
        default_factory=lambda: {
            "sample_id": [],
            "input_ids": [],
            "loss_mask": [],
            "num_tokens": [],
            "num_supervised": [],
            "source": [],
        }
    )
    rejects: list[dict[str, Any]] = field(default_factory=list)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def reject(self, sample_id: str | None, reason: str, detail: str) -> None:
        self.rejects.append({"sample_id": sample_id, "reason": reason, "detail": detail})
        self.counts["rejected"] += 1


@dataclass(frozen=True)
class Problem:
    """Why the text path cannot rebuild a record (a reject reason when there are no ids)."""

    reason: str
    detail: str


@dataclass(frozen=True)
class _Prepared:
    record: dict[str, Any]
    prompt_text: str
    reasoning: str
    content: str
    problem: Problem | None = None  # the text path cannot rebuild it; the server's ids may still

    @property
    def has_ids(self) -> bool:
        """The server sent the prompt and the completion ids: they are the training row."""
        return self.record.get("completion_token_ids") is not None and self.record.get("prompt_token_ids") is not None


class Limits(Protocol):
    """What the Reconstructor reads of its settings: reconstruct's ``ReconstructConfig`` is one, the
    pre-flight's ``TextPath`` another."""

    max_length: int
    overlong: Literal["truncate", "drop"]
    prefer: Literal["server", "text"]


@dataclass(frozen=True)
class TextPath:
    """Settings that rebuild every record from its text, whatever its length: the pre-flight's check."""

    max_length: int = 1 << 30
    overlong: Literal["truncate", "drop"] = "truncate"
    prefer: Literal["server", "text"] = "text"


class Reconstructor:
    """Holds the tokenizer, the verified token facts, the chat settings the server used and the
    recipe's text rules; turns record batches into rows."""

    def __init__(
        self,
        tokenizer: Any,
        facts: TokenFacts,
        cfg: Limits,
        chat: ChatSettings | None = None,
        target: TargetConfig | None = None,
    ) -> None:
        self.tokenizer, self.facts, self.cfg = tokenizer, facts, cfg
        self.chat = chat or ChatSettings()
        self.target = target or TargetConfig()
        self.server_prompt = server_renders_prompt(self.target)  # the prompt is the server's ids only
        self._blank: dict[tuple[int, ...], bool] = {}

    def run(self, records: list[dict[str, Any]]) -> BatchResult:
        result = BatchResult()
        result.counts["input_rows"] += len(records)
        prepared = [p for p in (self._prepare(r, result) for r in records) if p is not None]
        texts = [t for p in prepared for t in (p.prompt_text, p.reasoning, p.content)]
        ids = encode_batch(self.tokenizer, texts)
        for i, item in enumerate(prepared):
            self._assemble(item, ids[3 * i], ids[3 * i + 1], ids[3 * i + 2], result)
        return result

    def _prepare(self, record: dict[str, Any], result: BatchResult) -> _Prepared | None:
        """Check one record and render its prompt; None (and a counted reject) when it cannot be used."""
        sid = record.get("sample_id")
        messages = record.get("messages")
        if not sid or not isinstance(messages, list) or not messages:
            result.reject(sid, "malformed_record", "a record needs a sample_id and a non-empty messages list")
            return None
        reasoning, content = record.get("reasoning") or "", record.get("content") or ""
        if not reasoning and not content and not record.get("tool_calls"):
            result.reject(sid, "empty_completion", "neither reasoning nor content nor tool calls")
            return None
        without_ids = server_ids_missing(self.target, record)
        if without_ids is not None:  # never rebuilt from the local template or the flattened texts
            result.reject(sid, *without_ids)
            return None
        # a harmony prompt is the server's ids (``_assemble``): the local template never rendered it
        prompt, problem = ("", None) if self.server_prompt else self._render(record)
        if problem is None and reasoning and not self.facts.reasons:
            problem = Problem(
                "reasoning_on_non_reasoning_target",
                "the record has reasoning but the target's recipe has no reasoning markers "
                "(target.think_open and target.harmony are null): its template has nowhere to put it",
            )
        item = _Prepared(record, prompt, reasoning, content, problem)
        if problem is not None and not item.has_ids:
            result.reject(sid, problem.reason, problem.detail)
            return None
        return item

    def _render(self, record: dict[str, Any]) -> tuple[str, Problem | None]:
        """The prompt as the server rendered it (``render.server_messages``), or why the template failed."""
        try:
            tools = json.loads(record["tools"]) if record.get("tools") else None
            prompt = self.tokenizer.apply_chat_template(
                server_messages(record["messages"]),
                tools=tools,
                tokenize=False,
                add_generation_prompt=True,
                **self.chat.template_kwargs(),
            )
        except Exception as exc:  # a template raises anything from TypeError to its own exceptions
            return "", Problem("template_error", f"the chat template failed: {type(exc).__name__}: {exc}")
        return prompt, None

    def _assemble(
        self,
        item: _Prepared,
        prompt_ids: list[int],
        reasoning_ids: list[int],
        content_ids: list[int],
        result: BatchResult,
    ) -> None:
        """The server's ids decide where it sent them; the text rebuild is then only their check
        (for a harmony family, of the completion alone: the prompt is the server's)."""
        sid = item.record["sample_id"]
        if self.server_prompt:
            prompt_ids = list(item.record["prompt_token_ids"])
        server = self._server_sequence(item.record, prompt_ids)
        rebuilt = item.problem or self._rebuild(item, prompt_ids, reasoning_ids, content_ids)
        if item.record.get("tool_calls") and server is not None:
            result.counts["tool_call_turns"] += 1
        if isinstance(rebuilt, Problem):
            if server is None or (self.cfg.prefer == "text" and not item.record.get("tool_calls")):
                result.reject(sid, rebuilt.reason, rebuilt.detail)
                return
            result.counts[f"unchecked_{rebuilt.reason}"] += 1
            self._emit(sid, self._history(item, server, result), "server", result)
            return
        if server is None:
            self._emit(sid, self._history(item, rebuilt, result), "text", result)
            return
        self._compare(sid, rebuilt, server, result)
        if self.cfg.prefer == "server":
            self._emit(sid, self._history(item, server, result), "server", result)
        else:
            self._emit(sid, self._history(item, rebuilt, result), "text", result)

    def _history(self, item: _Prepared, seq: Sequence, result: BatchResult) -> Sequence:
        """``seq`` with its earlier answer turns supervised where the recipe says so
        (``target.history_supervised``, ``history.py``); unchanged otherwise."""
        if not self.target.history_supervised:
            return seq
        messages = server_messages(item.record["messages"])
        if not any(m["role"] == "assistant" for m in messages):
            return seq
        tools = json.loads(item.record["tools"]) if item.record.get("tools") else None
        prompt = seq.input_ids[: seq.prompt_len]
        kwargs, ends = self.chat.template_kwargs(), self.facts.turn_end_ids
        spans, unplaced = history_spans(self.tokenizer, messages, tools, kwargs, prompt, ends)
        result.counts["history_turns_supervised"] += len(spans)
        result.counts["history_turns_unplaced"] += unplaced
        return Sequence(seq.input_ids, supervised(seq.loss_mask, spans), seq.prompt_len)

    def _rebuild(
        self, item: _Prepared, prompt_ids: list[int], reasoning_ids: list[int], content_ids: list[int]
    ) -> Sequence | Problem:
        """The text path: prompt + output ids from the texts, or the Problem that stops it."""
        if item.record.get("tool_calls"):  # only the ids hold the tool-call tokens (layout.py)
            return Problem(
                "tool_calls_without_ids",
                "the answer calls tools: each family writes tool calls in its own tokens, which only "
                "the server's ids hold; generate with return_token_ids (vLLM or SGLang)",
            )
        forced = forced_think_position(prompt_ids, self.facts, self._is_blank)
        closed = think_closed_in_prompt(prompt_ids, self.facts, self._is_blank)
        if closed and item.reasoning:
            return Problem(
                "reasoning_after_closed_think",
                "the rendered prompt closes the think block (thinking switched off) but the record "
                "has reasoning: set target.chat.chat_template_kwargs as the server had them",
            )
        marks = None
        if self.facts.reasons and not closed:
            marks = self._marks(item, forced is not None)
            if isinstance(marks, Problem):
                return marks
        out = output_ids(
            self.facts,
            reasoning_ids,
            content_ids,
            think_closed=closed,
            marks=marks,
            stopped=item.record.get("finish_reason") != "length",
        )
        return masked(prompt_ids, out, forced, len(self.facts.think_open_ids or ()))

    def _marks(self, item: _Prepared, forced: bool) -> ThinkMarks | Problem:
        """Which reasoning markers the output holds: the ids say when there are some; the text
        only what it shows (``text_rules.undecidable``), never a guess."""
        server_out = item.record.get("completion_token_ids")
        if server_out is None:
            problem = undecidable(self.target, self.chat, item.reasoning, forced)
            if problem is not None:
                return Problem(*problem)
            if self.target.thinking_state(self.chat) is False and not forced:
                return ThinkMarks(opens=False, closes=False)
        marks = think_marks(self.facts, item.reasoning, item.content, think_in_prompt=forced, server_out=server_out)
        if marks is None:
            return Problem(
                "think_undecidable",
                "the text does not show which think tokens the target wrote (an empty answer: the "
                "turn ended inside its reasoning or right after </think>; or no reasoning at all) "
                "and the record has no server token ids to tell; generate with return_token_ids",
            )
        return marks

    def _server_sequence(self, record: dict[str, Any], prompt_ids: list[int]) -> Sequence | None:
        """The server's own prompt + completion ids with the loss mask; None when it sent no ids
        (a server without prompt ids gets the rendered prompt)."""
        if record.get("completion_token_ids") is None:
            return None
        prompt = list(record.get("prompt_token_ids") or prompt_ids)
        return masked(
            prompt,
            list(record["completion_token_ids"]),
            forced_think_position(prompt, self.facts, self._is_blank),
            len(self.facts.think_open_ids or ()),
        )

    def _compare(self, sid: str, rebuilt: Sequence, server: Sequence, result: BatchResult) -> None:
        result.counts["server_checked"] += 1
        diff = first_difference(rebuilt.input_ids, server.input_ids)
        if diff is None:
            result.counts["server_matched"] += 1
            return
        repeated = repeated_think_closes(
            rebuilt.input_ids, server.input_ids, server.prompt_len, self.facts.think_close_ids
        )
        if repeated:
            result.counts["server_repeated_think_close"] += 1
        result.mismatches.append(
            {
                "sample_id": sid,
                "repeated_think_closes": repeated,
                "first_diff": diff,
                # the prompts differ when their ids do, wherever the first difference falls
                "where": "prompt"
                if rebuilt.input_ids[: rebuilt.prompt_len] != server.input_ids[: server.prompt_len]
                else "completion",
                "rebuilt_tokens": len(rebuilt.input_ids),
                "server_tokens": len(server.input_ids),
                "rebuilt_near": rebuilt.input_ids[diff : diff + MISMATCH_CONTEXT],
                "server_near": server.input_ids[diff : diff + MISMATCH_CONTEXT],
            }
        )

    def _emit(self, sid: str, seq: Sequence, source: str, result: BatchResult) -> None:
        ids, mask = seq.input_ids, seq.loss_mask
        if len(ids) > self.cfg.max_length:
            if self.cfg.overlong == "drop":
                result.reject(sid, "overlong", f"{len(ids)} tokens > max_length {self.cfg.max_length}")
                return
            ids, mask = ids[: self.cfg.max_length], mask[: self.cfg.max_length]
            result.counts["truncated"] += 1
        supervised = sum(mask)
        if supervised == 0:
            result.reject(
                sid,
                "no_supervised_tokens",
                f"the prompt alone fills max_length {self.cfg.max_length}: nothing the target generated is left",
            )
            return
        for name, value in (
            ("sample_id", sid),
            ("input_ids", ids),
            ("loss_mask", mask),
            ("num_tokens", len(ids)),
            ("num_supervised", supervised),
            ("source", source),
        ):
            result.rows[name].append(value)
        result.counts["sequences"] += 1
        result.counts["tokens"] += len(ids)
        result.counts["supervised_tokens"] += supervised
        result.counts[f"source_{source}"] += 1

    def _is_blank(self, ids: tuple[int, ...]) -> bool:
        """True when ``ids`` decode to whitespace only (cached: it is the same few ids every time)."""
        if ids not in self._blank:
            text = self.tokenizer.decode(list(ids), skip_special_tokens=False)
            self._blank[ids] = text.strip() == ""
        return self._blank[ids]
