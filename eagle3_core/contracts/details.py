"""Each stage's manifest ``details``, typed: its writer builds the model, every reader asks it.

On disk ``details`` stays the JSON object it always was, with the same keys, so run folders
written before these models stay readable and complete. A stage writes ``Model(...).dump()``
(only the keys it gave: the JSON is what it wrote before); another stage, a task, the CLI or a
summary reads ``Model.of(manifest)``. A key renamed on one side therefore breaks the other side's
tests (``tests/run/test_manifest_details.py`` runs each writer through its model), not a run.

Strict on writing, lenient on reading, and why: the models refuse undeclared keys
(``extra="forbid"``), so a writer's new or misspelt key fails in its own tests at once; ``of``
hands the model only the keys it declares, so a manifest holding a key since dropped still reads.
A key an older manifest may lack defaults to None (or empty); the few a reader cannot do without,
which the writer has always written, are required: a manifest without one is one ``InputError``
naming the stage and the key. The driver's own keys (``reject_reasons``, ``error``) are declared
on the base, since any stage's manifest may carry them. A stage's model is found by its name
(``details_model``: the subclass whose ``stage`` it is), so a stage added with its own model in its
package needs no entry here, and one without reads through ``StageDetails``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import ValidationError

from eagle3_core.base import StrictModel
from eagle3_core.errors import InputError
from eagle3_core.run.manifest import StageManifest


class StageDetails(StrictModel):
    """What every stage's details may hold: the driver's rejects (reason -> rows) and a failure's first line."""

    stage: ClassVar[str] = ""

    reject_reasons: dict[str, int] | None = None
    error: str | None = None

    @classmethod
    def of(cls, manifest: StageManifest) -> Self:
        """The details of ``manifest`` through this model; a missing required key is an InputError."""
        known = {key: value for key, value in manifest.details.items() if key in cls.model_fields}
        try:
            return cls.model_validate(known)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(map(str, first["loc"]))
            raise InputError(
                f"the {cls.stage} manifest's details.{key}: {first['msg']}",
                fix=f"rerun `eagle3 {cls.stage}` on that folder: its manifest is not one this eagle3 writes",
            ) from None

    def dump(self) -> dict[str, Any]:
        """The JSON object for ``manifest.details``: the keys the writer gave, nothing added."""
        return self.model_dump(mode="json", exclude_unset=True)


class GenerateDetails(StageDetails):
    """generations/: the served run's figures (``generate/stage.py``) or the dataset run's (``dataset_source.py``)."""

    stage: ClassVar[str] = "generate"

    open_reasons: dict[str, int] = {}
    reasoning_sources: dict[str, int] | None = None
    finish_reasons: dict[str, int] = {}
    retries_by_reason: dict[str, int] = {}
    latency_s: dict[str, float] = {}  # p50, p90, p99, max of the answered requests (served runs)
    source: str | None = None  # "dataset" for the rows' own answers; absent for a served run
    model: str | None = None
    chat: dict[str, Any] | None = None  # target.chat as every request carried it (reconstruct renders with it)
    token_id_layouts: dict[str, str] = {}
    probe: str | None = None
    preflight: list[str] | None = None
    endpoints_down_at_start: dict[str, str] | None = None  # url -> why it was left out
    reasoning_layouts: dict[str, str] | None = None
    concurrency: int | str | None = None  # generate.concurrency: a number or "auto"
    concurrency_timeline: dict[str, list] = {}  # url -> [(seconds, in flight), ...]
    requests_per_endpoint: dict[str, int] | None = None
    endpoint_states: dict[str, str] | None = None
    breaker_opened: dict[str, int] | None = None
    rows_per_s: float | None = None


class ReconstructDetails(StageDetails):
    """sequences/ (``reconstruct/stage.py``)."""

    stage: ClassVar[str] = "reconstruct"

    server_check: dict[str, Any] | None = (
        None  # checked, matched, match_rate, warning (``reconstruct/server_check.py``)
    )
    mismatches: list[dict[str, Any]] = []
    token_ids: dict[str, Any] | None = None
    family: str | None = None
    prefer: str | None = None
    max_length: int | None = None
    overlong: str | None = None
    shards: int | None = None


class VocabDetails(StageDetails):
    """vocab/ (``vocab/stage.py``)."""

    stage: ClassVar[str] = "vocab"

    draft_vocab_size: int
    target_vocab_size: int
    coverage: float | None = None
    tokenizer: str | None = None
    requested_draft_vocab_size: int | None = None


class ExtractDetails(StageDetails):
    """hidden/ (``extract/stage.py``): what its shards hold, for train and the card."""

    stage: ClassVar[str] = "extract"

    layers: list[int]
    hidden_size: int
    engine: str
    num_hidden_layers: int | None = None
    vocab_size: int | None = None
    dtype: str | None = None
    padding_share: float | None = None
    bytes_per_token: float | None = None
    state_bytes_per_token: int | None = None
    shards_reused: int = 0


class TrainDetails(StageDetails):
    """drafter/ (``train/stage.py``; ``online``: mode online-vllm's engine and spool, ``train/online_run.py``)."""

    stage: ClassVar[str] = "train"

    heldout_initial: dict[str, Any] | None = None  # step, sim_acceptance_length, acc_k, ...
    heldout_final: dict[str, Any] | None = None
    sim_acceptance_length_initial: float | None = None
    sim_acceptance_length_final: float | None = None
    aux_layer_ids: list[int] | None = None
    draft_vocab_size: int | None = None
    mode: str | None = None
    resumed_from: int | None = None  # the checkpoint's step
    device: str | None = None
    world_size: int | None = None
    deepspeed_config: dict[str, Any] | None = None
    padding_share: float | None = None
    export: str | None = None
    online: dict[str, Any] | None = None


class EvaluateDetails(StageDetails):
    """eval/ (``evaluate/stage.py`` ``headline``): the few numbers a reader looks for first."""

    stage: ClassVar[str] = "evaluate"

    k: int
    temperature: float
    online_acceptance_length: float | None = None
    online_acceptance_per_position: list[float] | None = None
    vllm_refused: str | None = None  # vLLM's own message when it refused the drafter's method on this machine
    offline_acceptance_length: float | None = None
    speedup: float | None = None
    speedup_spread: Any = None
    speedup_error: str | None = None
    simulated_acceptance_length: float | None = None
    acceptance_by_context: dict[str, Any] | None = None
    acceptance_by_thinking: dict[str, float | None] | None = None  # mode -> vLLM's acceptance length (thinking.py)
    lossless: str | None = None  # the lossless sentence (lossless.py): greedy outputs identical with and without


def details_model(stage: str) -> type[StageDetails]:
    """The model of ``stage``'s details: the ``StageDetails`` subclass naming it (the built-in stages'
    above; a stage added later may declare one in its own package), else ``StageDetails`` itself (the
    driver's keys): a new stage needs no entry here."""
    return {m.stage: m for m in StageDetails.__subclasses__()}.get(stage, StageDetails)


BY_STAGE: dict[str, type[StageDetails]] = {m.stage: m for m in StageDetails.__subclasses__()}  # the ones above
