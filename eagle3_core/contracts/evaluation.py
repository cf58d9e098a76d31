"""eval/report.json (written by evaluate), typed: the stage writes it through ``EvaluationReport``, and the
model card, the trackers and the run summary read it through the same model, never by key paths.

The JSON is the object evaluate always wrote, key for key and in the same order (docs/stages/evaluate.md,
"The folder: eval/"): the writer hands its dict to ``EvaluationReport.built`` and writes ``dump()``, which
gives back exactly the keys the writer set (``exclude_unset``), each model declaring its fields in the
writer's order. ``tests/stages/evaluate/test_report_contract.py`` holds the bytes equal to the dict's on reports the
stage writes (online with every block, offline only, vLLM's refusal, passes left out).

Strict on writing, lenient on reading, as ``details.py``: ``built`` refuses a key no model declares
(``extra="forbid"``: a writer's new or misspelt key fails in evaluate's tests at once); ``read`` and ``of``
drop the keys a model does not declare (a report holding a key since dropped still reads), and every field
defaults to None (or empty), so a report written before a block existed (no ``thinking``, no
``per_request``, no ``lossless``, no ``left_out``) reads with that block absent. A figure keeps the type it
was measured in (``Count`` an int, ``Figure`` a float, as their writers make them), so a value never reads
back as another (2 written as 2.0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from eagle3_core.base import StrictModel
from eagle3_core.errors import InputError

READING = {"reading": True}  # validation context: drop undeclared keys (an older or newer report)

Figure = float  # a measured ratio (acceptance length, rate, speed-up): always a float, None where not measured
Count = int  # drafts, tokens, prompts


class ReportPart(StrictModel):
    """One object of report.json: undeclared keys refused on writing, dropped on reading."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys_when_reading(cls, data: Any, info: ValidationInfo) -> Any:
        if not (info.context or {}).get("reading") or not isinstance(data, dict):
            return data
        known = {name for name in cls.model_fields} | {f.alias for f in cls.model_fields.values() if f.alias}
        return {key: value for key, value in data.items() if key in known}


# ---- counters ----------------------------------------------------------------------------------


class SpecFigures(ReportPart):
    """One measurement's counters (``SpecCounters.summary``): vLLM's, the offline loop's, a bucket's."""

    drafts: Count | None = None
    draft_tokens: Count | None = None
    accepted_tokens: Count | None = None
    accepted_per_position: list[Count] | None = None
    acceptance_length: Figure | None = None
    acceptance_rate: Figure | None = None
    acceptance_per_position: list[Figure | None] | None = None


class StepRow(ReportPart):
    """vLLM's own verify steps in one bucket or phase (``per_request._row``)."""

    drafts: Count | None = None
    accepted_tokens: Count | None = None
    acceptance_length: Figure | None = None


class BucketRange(ReportPart):
    """A bucket's label and token range (``to`` None: open-ended)."""

    label: str | None = None
    from_: Count | None = Field(None, alias="from")
    to: Count | None = None


class StepBucket(StepRow, BucketRange):
    """label, from, to, then the steps in that range."""


class ContextBucket(SpecFigures, BucketRange):
    """label, from, to, the counters at the evaluated k, and the acceptance length at each swept k ("1", "2", ...)."""

    acceptance_length_by_k: dict[str, Figure | None] | None = None


# ---- online: vLLM ------------------------------------------------------------------------------


class Spread(ReportPart):
    requests: Count | None = None
    p10: Figure | None = None
    p50: Figure | None = None
    p90: Figure | None = None


class MetricsAgreement(ReportPart):
    """The per-request total against ``/metrics`` read around the same pass."""

    metrics_acceptance_length: Figure | None = None
    metrics_drafts: Count | None = None
    difference: Figure | None = None


class PerRequest(ReportPart):
    """``online.with_drafter.per_request``: vLLM's own verify steps of each answer (``per_request.summarize``)."""

    answered: Count | None = None
    requests: Count | None = None
    requests_without_steps: Count | None = None
    drafts: Count | None = None
    accepted_tokens: Count | None = None
    acceptance_length: Figure | None = None
    acceptance_per_position: list[Figure | None] | None = None
    by_position: list[StepBucket] | None = None
    by_phase: dict[str, StepRow] | None = None  # reasoning, answer, tool_call: those that hold a step
    by_context: list[StepBucket] | None = None
    spread: Spread | None = None
    unplaced_tokens: Count | None = None
    agreement_with_metrics: MetricsAgreement | None = None


class Arm(ReportPart):
    """One server's speed over the prompts (``online.arm_figures``): the baseline's whole block."""

    wall_s: Figure | None = None
    output_tokens: Count | None = None
    output_tokens_per_s: Figure | None = None
    output_tokens_per_s_repeats: list[Figure] | None = None
    failed_requests: Count | None = None


class WithDrafter(SpecFigures, Arm):
    """The server with the drafter: its speed, vLLM's counters of the first timed pass, its per-request steps."""

    per_request: PerRequest | None = None


class Difference(ReportPart):
    """Where two greedy outputs of one prompt first part (None: that output had ended)."""

    prompt: Count | None = None
    position: Count | None = None
    with_drafter: Count | str | None = None
    without_drafter: Count | str | None = None


class Greedy(ReportPart):
    compared: Count | None = None
    identical: Count | None = None
    identical_share: Figure | None = None
    differing: Count | None = None
    first_differences: list[Difference] | None = None
    unit: str | None = None  # tokens | characters


class Lengths(ReportPart):
    outputs: Count | None = None
    mean: Figure | None = None
    p50: Figure | None = None
    p90: Figure | None = None


class KsTest(ReportPart):
    statistic: Figure | None = None
    p_value: Figure | None = None


class Sampled(ReportPart):
    lengths: dict[str, Lengths] | None = None  # with_drafter, without_drafter
    ks: KsTest | None = None


class Lossless(ReportPart):
    """``online.lossless`` (``lossless.lossless_block``): whether drafting changed the outputs."""

    decoding: str | None = None  # greedy | sampled
    output_hash: dict[str, str | None] | None = None  # arm -> SHA-256 of its ids in prompt order
    greedy: Greedy | None = None
    sampled: Sampled | None = None
    not_compared: str | None = None
    line: str | None = None  # the sentence report.md and the card show


class AuxLayers(ReportPart):
    layer_ids: list[Count] | None = None
    source: str | None = None


class Engine(ReportPart):
    name: str | None = None
    version: str | None = None
    argv: list[str] | None = None


class Online(ReportPart):
    """``online``: vLLM with the drafter and (``baseline``) without it (``online.online_summary``)."""

    with_drafter: WithDrafter | None = None
    without_drafter: Arm | None = None
    speedup: Figure | None = None
    speedup_spread: list[Figure] | None = None
    speedup_error: str | None = None
    lossless: Lossless | None = None
    aux_layers_used_by_vllm: AuxLayers | None = None
    engine: Engine | None = None


class Refusal(ReportPart):
    """``vllm_refusal``: vLLM's own words where it refused the drafter's method on this machine."""

    message: str | None = None
    method: str | None = None
    device: str | None = None
    vllm_version: str | None = None
    argv: list[str] | None = None
    log: str | None = None
    measured_by: str | None = None


class Mode(ReportPart):
    """One thinking mode's figures, in the shape of ``online``'s (``thinking.mode_block``)."""

    chat_template_kwargs: dict[str, Any] | None = None
    acceptance_length: Figure | None = None
    acceptance_per_position: list[Figure | None] | None = None
    drafts: Count | None = None
    output_tokens: Count | None = None
    output_tokens_per_s: Figure | None = None
    speedup: Figure | None = None
    speedup_error: str | None = None
    lossless: Lossless | None = None
    per_request: PerRequest | None = None


class Thinking(ReportPart):
    switch: str | None = None
    trained_in: str | None = None  # on | off | model decides
    modes: dict[str, Mode] = {}


# ---- offline, context, the rest ----------------------------------------------------------------


class KFirst(ReportPart):
    k: Count | None = None


class SweepAt(SpecFigures, KFirst):
    """k, then its counters (the offline sweep's order)."""


class Offline(SpecFigures):
    """``offline``: the transformers chain loop at k, then over the sweep."""

    prompts: Count | None = None
    wall_s: Figure | None = None
    output_tokens: Count | None = None
    k_sweep: list[SweepAt] | None = None


class ByContext(ReportPart):
    """``by_context``: acceptance per bucket of context length (``buckets.context_block``)."""

    k: Count | None = None
    edges: list[Count] | None = None
    source: str | None = None  # vllm | offline | vllm-per-request
    buckets: list[ContextBucket] = []
    total: SpecFigures | None = None
    answers: Count | None = None
    vllm_acceptance_length: Figure | None = None
    difference_from_vllm: Figure | None = None

    def held(self) -> list[ContextBucket]:
        """The buckets that hold a round."""
        return [b for b in self.buckets if b.drafts]

    def ends(self) -> list[ContextBucket]:
        """The first and last buckets that hold a round (one when only one does; none when none does)."""
        held = self.held()
        return held[:1] + held[-1:] if len(held) > 1 else held


class Simulated(ReportPart):
    acceptance_length: Figure | None = None
    k: Count | None = None
    split: str | None = None
    step_accuracies: list[Figure] | None = None
    training_step: Count | None = None
    note: str | None = None


class Agreement(ReportPart):
    """Online minus offline at the same k, greedy."""

    online_acceptance_length: Figure | None = None
    offline_acceptance_length: Figure | None = None
    difference: Figure | None = None
    relative_difference: Figure | None = None
    per_request_acceptance_length: Figure | None = None
    per_request_difference: Figure | None = None


class Settings(ReportPart):
    num_speculative_tokens: Count | None = None
    temperature: Figure | None = None
    offline_temperature: Figure | None = None
    concurrency: Count | None = None
    offline_batch: Count | None = None
    max_tokens: Count | None = None
    k_sweep: list[Count] | None = None
    dtype_online: str | None = None
    dtype_offline: str | None = None
    device_offline: str | None = None


class Drafter(ReportPart):
    export_dir: str | None = None
    aux_layer_ids: list[Count] | None = None
    hidden_size: Count | None = None
    vocab_size: Count | None = None
    draft_vocab_size: Count | None = None


class Heldout(ReportPart):
    source: str | None = None
    prompts: Count | None = None
    skipped_rows: Count | None = None
    training_prompts_compared: Count | None = None


class EvaluationReport(ReportPart):
    """eval/report.json, in the order evaluate writes it."""

    settings: Settings = Settings()
    drafter: Drafter | None = None
    heldout: Heldout = Heldout()
    online: Online | None = None  # None: vLLM did not run, or refused the drafter (``vllm_refusal``)
    vllm_refusal: Refusal | None = None
    thinking: Thinking | None = None  # where the target has a thinking switch
    offline: Offline | None = None
    simulated: Simulated | None = None
    left_out: dict[str, str] = {}  # pass -> why it was left out; the other figures stand
    by_context: ByContext | None = None  # absent under evaluate.by_context: false
    definitions: dict[str, str] = {}
    agreement: Agreement | None = None

    @classmethod
    def built(cls, report: dict[str, Any]) -> Self:
        """The writer's report: every key declared, or a ValidationError naming the one that is not."""
        return cls.model_validate(report)

    @classmethod
    def of(cls, data: dict[str, Any], source: str = "eval/report.json") -> Self:
        """A report as read back: undeclared keys dropped, absent ones None; a wrong type is an InputError."""
        try:
            return cls.model_validate(data, context=READING)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(map(str, first["loc"]))
            raise InputError(
                f"{source}: {key}: {first['msg']}",
                fix="rerun `eagle3 evaluate`: that report is not one this eagle3 writes",
            ) from None

    @classmethod
    def read(cls, path: str | Path) -> Self:
        import json

        return cls.of(json.loads(Path(path).read_text(encoding="utf-8")), str(path))

    def dump(self) -> dict[str, Any]:
        """The JSON object of report.json: the keys the writer set, in its order, nothing added."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)

    # ---- what the readers ask ------------------------------------------------------------------

    @property
    def with_drafter(self) -> WithDrafter | None:
        """vLLM's figures with the drafter; None where vLLM did not measure it."""
        return self.online.with_drafter if self.online else None

    @property
    def per_request(self) -> PerRequest | None:
        """vLLM's own per-request steps of the headline pass."""
        return self.with_drafter.per_request if self.with_drafter else None

    @property
    def lossless(self) -> Lossless | None:
        return self.online.lossless if self.online else None

    @property
    def modes(self) -> dict[str, Mode]:
        """Each thinking mode measured (empty without a switch)."""
        return self.thinking.modes if self.thinking else {}
