"""``generate.source: dataset``: the input rows' own answers into ``generations/``, no server.

The baseline eagle3 is measured against (a drafter trained on a dataset's original answers, as
SpecForge does by default) and a first drafter before any server time is spent. Each row's
prompt is what the served path would send (``chat.rows.normalize_prompt``: trailing assistant turns
dropped); its answer is the row's own final assistant turn (``dataset_answer.py``).

The folder keeps the served run's contract (docs/stages/generate.md, "The folder: generations/"), so no downstream
stage changes:
- the same stage, shards, writer and resume (``generate.stage.GenerateStage``, every source's part
  in ``source.py``): atomic shards with checksums, ``complete`` written last, the folder's lock;
- every row ends accepted, rejected (``no_assistant_turn``, ``two_reasoning_blocks``,
  ``empty_reasoning`` when reasoning is required, or the served path's shape reasons) or skipped
  (a repeated prompt);
- keys: a sample is keyed by its prompt and ``{"source": "dataset"}`` instead of the sampling
  settings, and the config hash by the source too, so a dataset run and a served run in one
  folder never take each other's rows (the second drops the first's at finish);
- resumable: a rerun reads the durable keys and writes none of them again;
- no token ids (``prompt_token_ids``/``completion_token_ids`` null): reconstruct takes the text
  path, and its ``counts.source_text`` says so.

Bad input: when no row has an assistant turn at all, the run is one ``InputError`` naming the
input and what it looked for, raised before anything is written.
"""

from __future__ import annotations

import time
from typing import Any

from eagle3_core.chat.rows import RowRejection, normalize_prompt, row_json
from eagle3_core.contracts import generations
from eagle3_core.contracts.details import GenerateDetails
from eagle3_core.contracts.generations import REJECTED
from eagle3_core.endpoint.slots import SharedLimits
from eagle3_core.errors import InputError
from eagle3_core.prompts.inputs import fingerprint, iter_rows
from eagle3_core.run.manifest import StageManifest
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.dataset_answer import LOOKED_FOR, DatasetAnswer, dataset_answer, has_answer
from eagle3_core.stages.generate.keys import key64
from eagle3_core.stages.generate.shards import RowShardWriter
from eagle3_core.stages.generate.source import Source

SOURCE = "dataset"
MODEL = "dataset"  # the record's `model` and `endpoint` when the recipe names no model
SETTINGS = {"source": SOURCE}  # the whole sample key besides the prompt (generations.sample_key): nothing is sampled


class DatasetSource(Source):
    """One pass over the input: each row accepted, rejected, skipped or found on disk."""

    @staticmethod
    def key_parts(cfg: GenerateConfig) -> tuple[dict[str, Any], dict[str, str]]:
        """What changes its rows: the prompts and whether reasoning is required; the source keeps it
        apart from any served run. Sampling settings are left out on purpose: nothing is sampled."""
        parts = {"source": SOURCE, "prompts": cfg.prompts, "require_reasoning": cfg.require_reasoning}
        return parts, {"prompts": fingerprint(cfg.prompts)}

    def open(self) -> None:
        """The answers' check, before anything is written; then the keys of every durable row."""
        _check_answers_exist(self.cfg)
        self.model = self.cfg.model or MODEL
        self._open_writers()
        self._scan_folder()
        self._t0 = time.monotonic()

    def _produce(self, shared: SharedLimits | None) -> None:
        """Every row in turn (``shared`` limits are the served source's: nothing is sent here)."""
        for index, row in enumerate(iter_rows(self.cfg.prompts)):
            self.stats.input_rows += 1
            self._take(index, row)

    def finish(self, manifest: StageManifest) -> None:
        self._settle_folder()
        self.reporter.progress(
            "generate", self.stats.done, self.stats.input_rows, rejected=self.stats.outcomes[REJECTED]
        )
        self.fill(manifest)

    def _take(self, index: int, row: Any) -> None:
        prompt = normalize_prompt(row)
        if isinstance(prompt, RowRejection):
            self._reject_unkeyed(index, row, prompt)
            return
        messages, tools = prompt
        key = generations.sample_key(messages, SETTINGS, tools)
        if not self._is_new(key64(key)):
            return
        answer = self._checked(dataset_answer(row))
        if isinstance(answer, RowRejection):
            self._write(
                self.rejected, generations.rejected_row(key, index, row_json(row), answer.reason, answer.detail)
            )
            self.stats.reject(answer.reason)
            return
        record = dataset_record(key, messages, tools, answer, self.model)
        self._write(self.accepted, record)
        self.stats.accept(record)

    def _checked(self, answer: DatasetAnswer | RowRejection) -> DatasetAnswer | RowRejection:
        """The served path's rule: no reasoning is a reject when reasoning is required."""
        if isinstance(answer, DatasetAnswer) and self.cfg.require_reasoning and not answer.reasoning:
            return RowRejection(
                "empty_reasoning",
                "the answer has no reasoning (no reasoning_content field, no <think> tags); "
                "set generate.require_reasoning: false to take answers without reasoning",
            )
        return answer

    def _write(self, writer: RowShardWriter, row: dict[str, Any]) -> None:
        """Flushed when full or due (no loop flushes here), with the progress after each shard."""
        if writer.add(row) or writer.due():
            writer.flush()
            self.reporter.progress("generate", self.stats.done, None)

    def fill(self, manifest: StageManifest) -> None:
        """The run's figures into the running manifest (the driver writes it)."""
        details = self.stats.details() | {
            "source": SOURCE,
            "model": self.model,
            "chat": self.cfg.chat.model_dump(mode="json"),  # reconstruct renders the prompts with these
            "token_id_layouts": {SOURCE: "none"},
        }
        details.pop("latency_s")  # nothing was requested
        manifest.counts, manifest.details = self.stats.counts(), GenerateDetails(**details).dump()
        manifest.timings = {"generate": round(time.monotonic() - self._t0, 3)}


def dataset_record(key: str, messages: list, tools: list | None, answer: DatasetAnswer, model: str) -> dict:
    """An accepted row for a dataset answer (``generations.accepted_row``): nothing was requested,
    so no ids, token counts, attempts or latency; the dataset's turn is whole."""
    return generations.accepted_row(
        sample_id=key,
        messages=messages,
        reasoning=answer.reasoning,
        content=answer.content,
        reasoning_source=answer.reasoning_source,
        finish_reason="stop",
        model=model,
        endpoint=SOURCE,
        tools=tools,
        tool_calls=answer.tool_calls,
    )


def _check_answers_exist(cfg: GenerateConfig) -> None:
    """One error, before anything is written, when no row has an answer: a run of rejects
    would hide that the input (or the source) is the wrong one."""
    if cfg.allow_empty and next(iter_rows(cfg.prompts), None) is None:
        return
    if not any(has_answer(row) for row in iter_rows(cfg.prompts)):
        raise InputError(
            f"generate.source is dataset, but no row of {cfg.prompts.input} has a {LOOKED_FOR}",
            path=cfg.prompts.input,
            fix="give rows that end with the answer to train on, or set generate.source: server to "
            "have the target answer the prompts",
        )
