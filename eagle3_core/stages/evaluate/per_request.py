"""Acceptance from vLLM's own per-request verify steps: where in its answers the drafter keeps up.

vLLM 0.32 started with ``--per-request-spec-decode-metrics detailed`` (``evaluate/serving.py`` asks for
it beside the drafter) puts each answer's verify steps in its response (``chat.parse.SpecDecodeSteps``:
per step, the draft tokens kept of those drafted). Where a step stands in the output is vLLM's
scheduler's doing (``vllm/v1/core/sched/scheduler.py``, ``update_from_output``):

- the prefill writes output token 0 and verifies nothing: drafts are scheduled only for a request that
  holds some, never at its prefill, and ``observe`` runs only where drafts were scheduled;
- step s verifies the drafts made once p_s output tokens were known, p_s = 1 + sum_{t<s} (a_t + 1):
  its first drafted token is output position p_s, and it writes its a_s kept drafts plus the target's
  own token;
- vLLM counts a step before it cuts the step's tokens at a stop token or ``max_tokens``
  (``_update_request_with_output``), so the last step may write fewer than a_s + 1 tokens; it still
  starts at p_s and still counts a_s, as ``/metrics`` does.

A step counts where its first drafted token stands: in the bucket of that output position, in the phase
of the token there, and in the bucket of its context, prompt + p_s (the tokens known when vLLM drafted,
as ``buckets.replay`` counts a round). The totals are ``/metrics``' own: each ``observe`` is one
``make_spec_decoding_stats`` draft, so over the same requests 1 + accepted / steps equals the counters'
acceptance length. A decode step without drafts (a recompute after a preemption, a step the token budget
or max_model_len left no room to draft) writes a token no step accounts for and shifts the positions of
the steps after it: such tokens are counted (``unplaced_tokens``), never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_core.chat.parse import Completion, SpecDecodeSteps
from eagle3_core.stages.evaluate.buckets import ContextCounters, bucket_labels, context_block
from eagle3_core.stages.evaluate.metrics import SpecCounters
from eagle3_core.target.config import TargetConfig

# Output positions (0-based): 0-256, 256-1K, 1K-4K, 4K-16K, 16K+. A reasoning trace runs to 16K tokens and
# beyond (the recipes train 16K-token samples), the answer after it is mostly under 1K.
POSITION_EDGES = [256, 1024, 4096, 16384]
PHASES = ("reasoning", "answer", "tool_call")
SOURCE = "vllm-per-request"  # report.json's by_context.source when these steps fill it
NOT_CARRIED = (
    "no answer carried vLLM's per-request verify steps (metrics.speculative_decoding with per_step_accepted: "
    "vLLM >= 0.32 started with --per-request-spec-decode-metrics detailed; SGLang has none); the figures stand "
    "on vLLM's /metrics and the offline replay"
)


@dataclass(frozen=True)
class Step:
    """One verify step placed in its answer: ``position`` is the output position of its first draft."""

    position: int
    drafted: int
    accepted: int


@dataclass(frozen=True)
class ServedAnswer:
    """One answer of the timed pass with its verify steps: what every figure here is made of."""

    steps: SpecDecodeSteps
    output_ids: list[int]
    prompt_len: int
    reasoning_read: bool  # the server's parser read reasoning in it (an answer cut before its think-close)

    @classmethod
    def of(cls, completion: Completion | None) -> ServedAnswer | None:
        """None for a failed request, or an answer without steps or ids to place them in."""
        c = completion
        if c is None or c.spec_decode is None or c.completion_token_ids is None:
            return None
        prompt_len = len(c.prompt_token_ids) if c.prompt_token_ids is not None else c.prompt_tokens
        if prompt_len is None:
            return None
        return cls(c.spec_decode, c.completion_token_ids, prompt_len, bool(c.reasoning))

    def placed(self) -> list[Step]:
        """Each step at its first draft's output position (module docstring: prefill writes token 0)."""
        steps, known = [], 1
        for drafted, accepted in zip(self.steps.drafted, self.steps.accepted):
            steps.append(Step(known, drafted, accepted))
            known += accepted + 1
        return steps

    def unplaced_tokens(self) -> int:
        """Output tokens no verify step wrote (the module docstring's drafts-free decode steps)."""
        written = 1 + sum(a + 1 for a in self.steps.accepted)  # the last step's may be cut: never fewer
        return max(len(self.output_ids) - written, 0)

    def acceptance_length(self) -> float | None:
        """This answer's own 1 + accepted / steps; None without a step."""
        n = len(self.steps.accepted)
        return 1 + sum(self.steps.accepted) / n if n else None


@dataclass(frozen=True)
class PhaseMarkers:
    """The target's ids that split an answer into phases, as its tokenizer holds them."""

    think_close: tuple[int, ...] | None  # None: a target that does not reason (answer and tool call only)
    tool_call_start: int | None  # None: the recipe names no tool-call token

    def bounds(self, answer: ServedAnswer) -> tuple[int, int | None]:
        """(where the reasoning ends, where the tool call starts) in ``answer``'s output positions.

        The reasoning ends at the think-close marker; an answer without one is reasoning throughout when
        the server read reasoning in it (cut by ``max_tokens`` while thinking, or a Kimi-K2.5 tool call
        straight out of its reasoning), else answer throughout."""
        ids = answer.output_ids
        tool = ids.index(self.tool_call_start) if self.tool_call_start in ids else None
        if self.think_close is None:
            return 0, tool
        close = _find(ids, self.think_close)
        if close is None:
            close = len(ids) if answer.reasoning_read else 0
        return close, tool


def _find(ids: list[int], marker: tuple[int, ...]) -> int | None:
    """The first position where ``marker`` (harmony's is several ids) starts in ``ids``."""
    n = len(marker)
    return next((i for i in range(len(ids) - n + 1) if tuple(ids[i : i + n]) == marker), None)


def phase_at(position: int, bounds: tuple[int, int | None]) -> str:
    reasoning_end, tool_start = bounds
    if tool_start is not None and position >= tool_start:
        return "tool_call"
    return "reasoning" if position < reasoning_end else "answer"


def phase_markers(target: TargetConfig) -> tuple[PhaseMarkers | None, str | None]:
    """The target's markers, checked against its tokenizer (``tokenizer.token_facts``), or why not: a
    recipe that does not fit the tokenizer costs the by-phase figure only, never the others."""
    from eagle3_core.errors import Eagle3Error
    from eagle3_core.target.tokenizer import load_tokenizer, token_facts

    try:
        facts = token_facts(load_tokenizer(target.require_path(), target.trust_remote_code), target, target.path)
    except Eagle3Error as exc:
        return None, f"the target's phase markers do not fit its tokenizer ({exc.message})"
    return PhaseMarkers(facts.think_close_ids, facts.tool_call_start_id), None


def served_answers(completions: list[Completion | None]) -> list[ServedAnswer]:
    return [answer for answer in map(ServedAnswer.of, completions) if answer is not None]


def summarize(
    completions: list[Completion | None],
    markers: PhaseMarkers | None,
    k: int,
    context_edges: list[int],
    metrics: SpecCounters,
) -> dict:
    """The ``per_request`` block of report.json's ``online.with_drafter``, from the answers of the pass
    ``metrics`` was read around (None where a request failed)."""
    answers = served_answers(completions)
    steps = [step for answer in answers for step in answer.placed()]
    whole = _counters(steps)
    return {
        "answered": sum(c is not None for c in completions),
        "requests": len(answers),
        "requests_without_steps": sum(not answer.steps.accepted for answer in answers),
        "drafts": int(whole.drafts),
        "accepted_tokens": int(whole.accepted),
        "acceptance_length": whole.acceptance_length,
        "acceptance_per_position": per_draft_position(steps, k),
        "by_position": _rows(by_position(answers)),
        "by_phase": by_phase(answers, markers) if markers is not None else None,
        "by_context": _rows(context_counters(answers, context_edges)),
        "spread": spread(answers),
        "unplaced_tokens": sum(answer.unplaced_tokens() for answer in answers),
        "agreement_with_metrics": agreement_with_metrics(whole, metrics),
    }


def _counters(steps: list[Step]) -> SpecCounters:
    counters = SpecCounters()
    for step in steps:
        counters.record_step(step.drafted, step.accepted)
    return counters


def per_draft_position(steps: list[Step], k: int) -> list[float | None]:
    """Draft position i: steps that kept i + 1 drafts or more / steps that drafted i + 1 or more (vLLM
    drafts fewer than k near ``max_model_len``: those steps do not count against a position they lack)."""
    kept = [sum(step.accepted > i for step in steps) for i in range(k)]
    drafted = [sum(step.drafted > i for step in steps) for i in range(k)]
    return [a / d if d else None for a, d in zip(kept, drafted)]


def by_position(answers: list[ServedAnswer]) -> ContextCounters:
    counters = ContextCounters(list(POSITION_EDGES))
    for step in (step for answer in answers for step in answer.placed()):
        counters.record(step.position, step.drafted, step.accepted)
    return counters


def context_counters(answers: list[ServedAnswer], edges: list[int]) -> ContextCounters:
    """Steps by context length: the prompt and the output tokens known when vLLM drafted."""
    counters = ContextCounters(list(edges))
    for answer in answers:
        for step in answer.placed():
            counters.record(answer.prompt_len + step.position, step.drafted, step.accepted)
    return counters


def by_phase(answers: list[ServedAnswer], markers: PhaseMarkers) -> dict[str, dict]:
    """Each phase that holds a step: reasoning, answer, tool call (``PhaseMarkers.bounds``)."""
    phases = {name: SpecCounters() for name in PHASES}
    for answer in answers:
        bounds = markers.bounds(answer)
        for step in answer.placed():
            phases[phase_at(step.position, bounds)].record_step(step.drafted, step.accepted)
    return {name: _row(counters) for name, counters in phases.items() if counters.drafts}


def spread(answers: list[ServedAnswer]) -> dict | None:
    """p10, p50 and p90 of the answers' own acceptance lengths (answers with a step)."""
    lengths = sorted(length for length in (a.acceptance_length() for a in answers) if length is not None)
    if not lengths:
        return None
    return {"requests": len(lengths), **{f"p{q}": percentile(lengths, q) for q in (10, 50, 90)}}


def percentile(ordered: list[float], q: float) -> float:
    """The q-th percentile of sorted values, linear between the two nearest (numpy's default)."""
    at = (len(ordered) - 1) * q / 100
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def agreement_with_metrics(whole: SpecCounters, metrics: SpecCounters) -> dict:
    """These steps against ``/metrics`` read around the same pass: equal unless a request failed or was retried
    (its steps are in the counters only) or an answer came without its steps."""
    ours, theirs = whole.acceptance_length, metrics.acceptance_length
    return {
        "metrics_acceptance_length": theirs,
        "metrics_drafts": int(metrics.drafts),
        "difference": ours - theirs if ours is not None and theirs is not None else None,
    }


def report_context_block(answers: list[ServedAnswer], k: int, edges: list[int], vllm: float | None) -> dict:
    """report.json's ``by_context`` from these steps (where the replay did not run): the replay's shape, at
    the evaluated k only, its total beside ``/metrics``' acceptance length ``vllm``."""
    block = {**context_block({k: context_counters(answers, edges)}, k, SOURCE), "answers": len(answers)}
    total = block["total"]["acceptance_length"]
    block["vllm_acceptance_length"] = vllm
    block["difference_from_vllm"] = total - vllm if total is not None and vllm is not None else None
    return block


def _row(counters: SpecCounters) -> dict:
    return {
        "drafts": int(counters.drafts),
        "accepted_tokens": int(counters.accepted),
        "acceptance_length": counters.acceptance_length,
    }


def _rows(counters: ContextCounters) -> list[dict]:
    """The buckets that hold a step, each with its range (``to`` None: open-ended)."""
    labels, bounds = bucket_labels(counters.edges), [0, *counters.edges, None]
    return [
        {"label": labels[i], "from": bounds[i], "to": bounds[i + 1], **_row(bucket)}
        for i, bucket in enumerate(counters.buckets)
        if bucket.drafts
    ]
