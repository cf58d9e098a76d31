"""Pre-flight check of a recipe against a live server: a small fixed suite, before the long run.

The server's token ids are the truth; reconstruct's text path rebuilds them from the text the
server returned. Each case of ``SUITE`` is one chat request with the recipe's settings
(``target.chat``, ``generate``) at the boundaries a single short question misses:

- ``question``: one question with room to finish (the run's own ``generate.max_tokens``), so the
  ``</think>`` -> answer boundary and the end-of-turn token are in the ids;
- ``system``: a system prompt;
- ``two_turns``: a history with an earlier answer (how the template renders past turns);
- ``tool_round_trip``: a tool definition, an earlier tool call (``arguments`` a JSON string, as
  clients send it) and its result (skipped, and said so, when the server refuses tools or the
  family's template cannot render the call: ``target.renders_past_tool_calls``).

Per case: whether the server's ids equal the reconstruction, whether the turn ended on one of the
recipe's end-of-turn tokens, and whether it was cut by ``max_tokens``. A think-close the model
wrote again after its reasoning ended is no difference: the server's parser drops it from the text
whatever the recipe says, so it is told as a note. Any other difference is one
``EndpointError`` naming the case, the first differing tokens and the setting that usually causes
that kind of difference (``likely_cause``), a server-side template override among them. A server
that returns no completion ids cannot be checked, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eagle3_core.chat.rows import has_past_tool_calls
from eagle3_core.contracts import generations
from eagle3_core.endpoint.config import RequestConfig
from eagle3_core.errors import Eagle3Error, EndpointError
from eagle3_core.preflight.history import ADD_TOOL, CALL
from eagle3_core.target.config import TargetConfig

QUESTION = {"role": "user", "content": "What is 17 + 25? Think it through, then answer."}
SUITE: dict[str, tuple[list[dict], list[dict] | None]] = {
    "question": ([QUESTION], None),
    "system": ([{"role": "system", "content": "You are a careful assistant."}, QUESTION], None),
    "two_turns": (
        [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4."}, QUESTION],
        None,
    ),
    "tool_round_trip": (
        [
            {"role": "user", "content": "Use the tool: what is 17 + 25?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_0", "name": "add", "content": "42"},
        ],
        [ADD_TOOL],
    ),
}
PREFLIGHT_MESSAGES = SUITE["question"][0]


@dataclass(frozen=True)
class CaseResult:
    name: str
    tokens: int
    note: str  # what was checked, or why not


@dataclass(frozen=True)
class PreflightReport:
    url: str
    model: str
    id_layout: str
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.cases[0].tokens if self.cases else 0

    def line(self) -> str:
        head = (
            f"pre-flight: {self.url} ({self.model}): the server's {self.tokens} token ids equal the reconstruction "
            f"of its own text (ids in the {self.id_layout} layout)"
        )
        return "\n".join([head] + [f"  {c.name}: {c.note}" for c in self.cases])


def preflight(
    target: TargetConfig, gen: RequestConfig, url: str, max_tokens: int | None = None, strict: bool = False
) -> PreflightReport:
    """Run ``SUITE`` and the history cases against ``url``; the report when every case agrees, else
    ``EndpointError``. ``max_tokens`` defaults to the run's own ``generate.max_tokens``: the room the
    run gives. ``strict`` (``eagle3 probe``): a server that refuses tools is an error naming the
    recipe's tool parser, not a skipped case (generate's own probe stops on it when rows carry tools)."""
    from eagle3_core.target.tokenizer import load_tokenizer, token_facts

    tokenizer = load_tokenizer(target.require_path(), target.trust_remote_code)
    facts = token_facts(tokenizer, target, target.path)
    gen = gen.model_copy(update={"return_token_ids": True})
    cases, layout, model = [], "none", gen.model
    for name, (messages, tools) in SUITE.items():
        if skipped := _not_for(target, messages, tools):
            cases.append(CaseResult(name, 0, skipped))
            continue
        answered = _ask(gen, url, max_tokens, messages, tools, optional=tools is not None)
        if answered is None:
            cases.append(_tools_refused(target, url, name, strict))
            continue
        model, body = answered
        record, layout = _record(url, name, messages, tools, body)
        cases.append(_check(tokenizer, facts, target, record, url, name))
    cases.append(_history(tokenizer, target, gen, url, strict))
    return PreflightReport(url, model, layout, cases)


NO_TOOLS_NOTE = "skipped: the family writes no tool calls (target.calls_tools: false)"
PAST_TOOL_CALLS_NOTE = (
    "skipped: the family's template cannot render an earlier tool call as vLLM hands it "
    "(target.renders_past_tool_calls: false)"
)


def _not_for(target: TargetConfig, messages: list[dict], tools: list[dict] | None) -> str | None:
    """Why a case is not sent to this family's server (its note), None to send it."""
    if tools is not None and not target.calls_tools:
        return NO_TOOLS_NOTE
    if not target.renders_past_tool_calls and has_past_tool_calls(messages):
        return PAST_TOOL_CALLS_NOTE
    return None


def _tools_refused(target: TargetConfig, url: str, name: str, strict: bool) -> CaseResult:
    """A server that refuses `tools`: vLLM started without a tool-call parser."""
    if not strict:
        return CaseResult(name, 0, "skipped: the server refused the request with tools (HTTP 4xx)")
    parser = target.tool_parser.vllm if target.tool_parser and target.tool_parser.vllm else "NAME"
    raise EndpointError(
        f"{url} [{name}]: the server refuses requests with `tools` (HTTP 4xx): every input row with tools would be "
        "refused the same way",
        fix=f"start vLLM with --enable-auto-tool-choice --tool-call-parser {parser} (target.tool_parser.vllm; "
        "`eagle3 serve --config` passes it), SGLang with --tool-call-parser (target.tool_parser.sglang)",
    )


def _history(tokenizer: Any, target: TargetConfig, gen: RequestConfig, url: str, strict: bool) -> CaseResult:
    """What the served template does with earlier reasoning, against ``target.history_reasoning``
    (``history.py``): two requests of one completion token, only their prompt ids read."""
    from eagle3_core.chat.parse import parse_completion
    from eagle3_core.preflight.history import HISTORY_CASES, check_rule, rendered

    seen: dict[str, bool | None] = {}
    for name, (messages, tools, text) in HISTORY_CASES.items():
        if _not_for(target, messages, tools):
            seen[name] = None
            continue
        answered = _ask(gen, url, 1, messages, tools, optional=tools is not None)
        if answered is None:
            _tools_refused(target, url, name, strict)
            seen[name] = None
            continue
        seen[name] = rendered(tokenizer, parse_completion(answered[1]).prompt_token_ids, text, url, name)
    note = check_rule(target.history_reasoning, bool(seen["past_reasoning"]), seen["tool_loop_reasoning"], url)
    return CaseResult("history", 0, note)


def generate_preflight(target: TargetConfig | None):
    """The check generate's own probe runs on each endpoint before the first prompt (``GenerateStage``'s
    ``preflight``): this suite, its report as lines; None when the target has no local tokenizer
    to rebuild the server's ids with (``target.path`` unset). A difference or a failure is one
    warning line with its fix, never a stop: where the server returns ids they are the training
    rows, and the text path is only their check (and ``eagle3 probe --recipe`` stops on it)."""
    if target is None or not target.path:
        return None

    def check(gen: RequestConfig, url: str) -> str:
        try:
            return preflight(target, gen, url).line()
        except Eagle3Error as exc:
            fix = f" ({exc.fix})" if exc.fix else ""
            return f"warning: pre-flight: {exc.message}{fix}"

    return check


def _record(url: str, name: str, messages: list[dict], tools: list[dict] | None, body: dict) -> tuple[dict, str]:
    """The generation record generate would write for this answer, and its id layout."""
    from eagle3_core.chat.parse import parse_completion

    completion = parse_completion(body)
    if completion.completion_token_ids is None:
        raise EndpointError(
            f"{url} returned no token ids for the completion (layout: {completion.id_layout}): the text path cannot be "
            "checked, and training will rest on re-tokenized text alone",
            fix="serve with vLLM or SGLang, which return ids with `return_token_ids: true`",
        )
    record = generations.accepted_row(
        sample_id=f"preflight-{name}",
        messages=messages,
        reasoning=completion.reasoning,
        content=completion.content,
        reasoning_source=completion.reasoning_source,
        finish_reason=completion.finish_reason,
        model=body.get("model") or "",
        endpoint=url,
        prompt_token_ids=completion.prompt_token_ids,
        completion_token_ids=completion.completion_token_ids,
        tools=tools,
        tool_calls=completion.tool_calls,
    )
    return record, completion.id_layout


def _ask(
    gen: RequestConfig, url: str, max_tokens: int, messages: list[dict], tools: list[dict] | None, optional: bool
) -> tuple[str, dict] | None:
    from eagle3_core.endpoint.checks import chat, list_models, probe_client
    from eagle3_core.endpoint.client import request_body

    with probe_client(gen, timeout=300.0) as http:
        model = gen.model or (list_models(http, url, gen.api_key_env) or [None])[0]
        try:
            body = request_body(gen, model, messages, max_tokens, tools=tools)
            return model, chat(http, url, body, gen.api_key_env)
        except EndpointError as exc:
            if optional and "answered HTTP 4" in str(exc):
                return None
            raise


def _check(tokenizer: Any, facts: Any, target: TargetConfig, record: dict, url: str, name: str) -> CaseResult:
    """Rebuild the record from its text and compare with the server's ids; EndpointError on a difference."""
    from eagle3_core.rebuild.build import Reconstructor, TextPath

    result = Reconstructor(tokenizer, facts, TextPath(), target.chat, target).run([record])
    if result.rejects:
        reject = result.rejects[0]
        raise EndpointError(
            f"{url} [{name}]: the server's answer cannot be reconstructed ({reject['reason']}: {reject['detail']})",
            fix="check target.chat and target.reasoning_parser against the served model",
        )
    if result.mismatches:
        mismatch = result.mismatches[0]
        if mismatch["repeated_think_closes"]:
            return CaseResult(name, mismatch["server_tokens"], _repeated_note(mismatch["repeated_think_closes"]))
        if _same_text(tokenizer, record, result.rows["input_ids"][0], mismatch["first_diff"]):
            return CaseResult(name, mismatch["server_tokens"], SPLIT_NOTE)
        _raise_difference(tokenizer, mismatch, url, name)
    return CaseResult(name, len(result.rows["input_ids"][0]), _note(facts, record, result.rows["source"][0]))


SPLIT_NOTE = (
    "ids differ only in how the same text is split into tokens: the model wrote a split the tokenizer would "
    "not make (' Nou' 'present' for ' N' 'oup' 'resent'); no setting causes it, the ids are the training rows, "
    "and a text-only run would train on the tokenizer's split"
)


def _same_text(tokenizer: Any, record: dict, rebuilt: list[int], first_diff: int) -> bool:
    """Whether the rebuilt and the server's ids spell the same text from their first difference on:
    a re-tokenization, not a recipe error (a random or sampling model writes non-canonical splits)."""
    server = list(record["prompt_token_ids"] or []) + list(record["completion_token_ids"])
    if first_diff < len(record["prompt_token_ids"] or []):
        return False  # a prompt that renders otherwise is a recipe's business, whatever it spells
    # a split with as many tokens is still a split: text the detokenizer lost (a skipped special
    # token, stripped whitespace) spells otherwise, so the decoded texts tell the two apart
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    return decode(rebuilt[first_diff:]) == decode(server[first_diff:])


def _repeated_note(count: int) -> str:
    return (
        f"ids equal but for {count} think-close token(s) the model wrote again in its answer, which the server's "
        "reasoning parser drops from the text: the ids keep them (they are the training rows); a text-only run "
        "would lose them"
    )


def _note(facts: Any, record: dict, source: str) -> str:
    """What this case showed beyond the ids' equality: where the turn ended."""
    completion = record["completion_token_ids"]
    if source == "server":
        return "a tool call: its tokens only the ids hold (trained on them, not compared)"
    if record["finish_reason"] == "length":
        return "ids equal, but cut by max_tokens: the end of the reasoning and of the turn were not seen (raise --max-tokens)"
    if completion and completion[-1] not in facts.turn_end_ids:
        return (
            f"ids equal, but the turn ended on id {completion[-1]}, none of the recipe's end-of-turn tokens "
            f"{list(facts.turn_end_ids)} (target.end_of_turn, target.other_turn_ends)"
        )
    return f"ids equal, ended on end-of-turn id {completion[-1] if completion else None}"


def _raise_difference(tokenizer: Any, diff: dict, url: str, name: str) -> None:
    rebuilt, server = _pieces(tokenizer, diff["rebuilt_near"]), _pieces(tokenizer, diff["server_near"])
    raise EndpointError(
        f"{url} [{name}]: the server's ids differ from the reconstruction of its own text at token {diff['first_diff']} "
        f"(in the {diff['where']}): rebuilt {rebuilt} vs server {server}",
        fix=likely_cause(diff["where"], rebuilt, server),
    )


def _pieces(tokenizer: Any, ids: list[int]) -> list[str]:
    return [tokenizer.decode([i], skip_special_tokens=False) for i in ids]


def likely_cause(where: str, rebuilt: list[str], server: list[str]) -> str:
    """The setting that usually causes this kind of difference."""
    if where == "prompt":
        return (
            "the prompt renders differently: set target.chat.chat_template_kwargs as the server has them "
            "(thinking switch, date_string), point target.path at the served model's own tokenizer, and check "
            "that the server does not override the template (--chat-template, --default-chat-template-kwargs)"
        )
    spaces = sum(p.count(" ") for p in rebuilt) - sum(p.count(" ") for p in server)
    if spaces > 0:
        return (
            "the server's text has spaces the model never wrote around special tokens: set "
            "target.chat.spaces_between_special_tokens: false (a slow tokenizer's detokenizer adds them)"
        )
    if spaces < 0 or "".join(rebuilt).strip() == "".join(server).strip():
        return (
            "the server's text lost whitespace the model wrote (SGLang strips the reasoning): the text path "
            "cannot be trusted; keep the server's ids (generate.return_token_ids, reconstruct.prefer: server)"
        )
    return (
        "the text lacks tokens the model wrote: set target.chat.skip_special_tokens: false, and check that "
        "target.reasoning_parser fits the template"
    )
