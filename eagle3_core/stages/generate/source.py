"""Where generate's answers come from: the one interface of its sources, and what they all share.

A source is a class the stage picks by ``generate.source`` (``stage.source_for``, the one place the
string is branched on), as train picks its hidden states (``train/hidden_sources.py``):

- ``ServedSource`` (``server``, ``served_source.py``): each prompt sent to the endpoints;
- ``DatasetSource`` (``dataset``, ``dataset_source.py``): each input row's own answer, no server.

It states, for a config: its skip keys (``keys``; ``settled`` first fills in what they need that the
config leaves open, the served source's answering model), the packages its manifest records
(``versions``), the field of the config listing the endpoints it asks (``endpoint_field``, None
for a source that sends nothing) and each endpoint's most requests in flight (``endpoints``). A
run of it has the stage's phases: ``open`` (checks and the resume scan, before ``running`` is
written), ``run_all(shared)`` (every row, within ``shared``'s share of each endpoint's limit),
``finish(manifest)`` and ``fill(manifest)`` (its figures into the manifest the driver writes).

Written once here, for every source, the folder's contract (docs/stages/generate.md, generations/):
- the accepted and rejected shard writers (``shards.RowShardWriter``: atomic shards);
- the resume scan: every durable row's key and outcome (``shards.read_persisted``); a sample on
  disk is counted ``resumed`` and never produced again, a repeat in the input ``skipped``;
- an unkeyed reject (a malformed row) found on disk at its row index is kept, not written twice;
- whatever stops ``run_all``, the finished rows are flushed first (best effort: a full disk may
  refuse it), so the driver's ``failed`` or an interrupt's ``running`` records what was done;
- at finish, rows an earlier run wrote for prompts this run does not have, and open rows this run
  produced again, leave the folder (``shards.drop_stale``), and the resumed rejects count under
  their reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from eagle3_core.chat.rows import RowRejection, row_json
from eagle3_core.contracts import generations
from eagle3_core.contracts.generations import ACCEPTED, REJECTED
from eagle3_core.endpoint.slots import SharedLimits
from eagle3_core.run.manifest import StageManifest
from eagle3_core.run.progress import Reporter
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.keys import KeySet
from eagle3_core.stages.generate.shards import RowShardWriter, drop_stale, read_persisted, shard_files
from eagle3_core.stages.generate.stats import RunStats


class Source:
    """One pass over the input into ``out_dir``; the phases are ``GenerateStage``'s."""

    versions: ClassVar[tuple[str, ...]] = ("polars",)  # the packages its manifest records
    endpoint_field: ClassVar[str | None] = None  # the config field listing the endpoints it asks; None: none

    @staticmethod
    def key_parts(cfg: GenerateConfig) -> tuple[dict[str, Any], dict[str, str]]:
        """The parts of the stage's key (``run.keys.stage_key``) and the input fingerprints a finished run is
        recorded under."""
        raise NotImplementedError

    @staticmethod
    def settled(cfg: GenerateConfig) -> GenerateConfig:
        """``cfg`` with what its keys need and the config does not say filled in, before the skip is
        decided (the served source: the model that answers); as given by default."""
        return cfg

    @staticmethod
    def endpoints(cfg: GenerateConfig) -> dict[str, int]:
        """Each endpoint it sends to, with the most requests it keeps in flight there (none by default)."""
        return {}

    def __init__(
        self, cfg: GenerateConfig, out_dir: str | Path, reporter: Reporter, preflight: Callable | None = None
    ) -> None:
        """``preflight``: the pre-flight suite run on each endpoint before the first prompt (a source
        that sends nothing has no use for it)."""
        self.cfg, self.out_dir, self.reporter = cfg, Path(out_dir), reporter
        self.preflight = preflight
        self.stats = RunStats()
        self.timings: dict[str, float] = {}
        self._seen = KeySet()  # keys of this pass, 8 bytes each (keys.py)
        self._bad_rows: set[int] = set()  # row indices of this pass's unkeyed rejects already on disk

    # ---- phases -------------------------------------------------------------------------

    def open(self) -> None:
        raise NotImplementedError

    def run_all(self, shared: SharedLimits | None = None) -> None:
        """Every row (``_produce``); whatever stops it, the rows that finished are flushed first."""
        try:
            self._produce(shared)
        except BaseException:
            self._flush_what_finished()
            raise

    def finish(self, manifest: StageManifest) -> None:
        raise NotImplementedError

    def fill(self, manifest: StageManifest) -> None:
        raise NotImplementedError

    def _produce(self, shared: SharedLimits | None) -> None:
        raise NotImplementedError

    # ---- the folder, for every source -----------------------------------------------------

    def _open_writers(self) -> None:
        cfg = self.cfg
        self.accepted = RowShardWriter(self.out_dir / ACCEPTED, ACCEPTED, cfg.shard_rows, cfg.flush_seconds)
        self.rejected = RowShardWriter(self.out_dir / REJECTED, REJECTED, cfg.shard_rows, cfg.flush_seconds)

    def _scan_folder(self) -> None:
        """What earlier runs left here: the rows to skip, and the open ones to produce again."""
        self.persisted, self.unkeyed, self.resent = read_persisted(self.out_dir)
        self._earlier = shard_files(self.out_dir / ACCEPTED) + shard_files(self.out_dir / REJECTED)
        if self.persisted or self.unkeyed:
            self.reporter.log(f"generate: resuming; {len(self.persisted) + len(self.unkeyed)} rows already on disk")

    def _writers(self) -> tuple[Any, ...]:
        """What buffers rows (each with ``flush``)."""
        return self.accepted, self.rejected

    def _flush(self) -> None:
        for writer in self._writers():
            writer.flush()

    def _flush_what_finished(self) -> None:
        """Best effort (a full disk may refuse it): the rows that finished stay on disk."""
        try:
            self._flush()
        except Exception:
            pass

    def _settle_folder(self) -> None:
        """At finish: every row durable, the stale ones gone, the resumed rejects counted."""
        self._flush()
        self._drop_stale()
        self._count_resumed_reasons()

    def _is_new(self, short: int) -> bool:
        """True for a sample to produce; False for a repeat in this input (skipped) or a sample an
        earlier run made durable (resumed, never produced again)."""
        if short in self._seen:
            self.stats.skip()
            return False
        self._seen.add(short)
        if (outcome := self.persisted.get(short)) is not None:
            self.stats.resume(outcome)
            return False
        return True

    def _reject_unkeyed(self, index: int, row: Any, why: RowRejection) -> None:
        """A row with no sample key (malformed): kept where an earlier run wrote it, else written."""
        if index in self.unkeyed:
            self._bad_rows.add(index)
            self.stats.resume(REJECTED)
            return
        self._write(self.rejected, generations.rejected_row(None, index, row_json(row), why.reason, why.detail))
        self.stats.reject(why.reason)

    def _write(self, writer: RowShardWriter, row: dict[str, Any]) -> None:
        if writer.add(row):
            writer.flush()  # a long run of bad rows never waits for the next flush

    def _drop_stale(self) -> None:
        """Rows an earlier run here wrote for prompts this run does not have (another sampling
        config, a smaller max_samples, an edited input) leave the folder: readers take every row
        of accepted/, and mixing them in would train on samples this run never asked for."""
        if self.stats.resumed == len(self.persisted) + len(self.unkeyed) and not self.resent:
            return  # every row on disk belongs to this run
        dropped = drop_stale(self._earlier, self._seen.__contains__, self._bad_rows)
        self.reporter.log(
            f"generate: dropped {dropped} earlier rows ({self.resent} open rows this run produced again; "
            "the rest written for other prompts or settings)"
        )

    def _count_resumed_reasons(self) -> None:
        """The rejects an earlier run wrote count under their reasons too, as they do under
        ``counts.rejected``: the earlier shards hold exactly them once the stale rows are gone."""
        import polars as pl

        if self.stats.outcomes[REJECTED] == self.stats.reject_reasons.total:
            return  # nothing rejected was resumed
        for file in self._earlier:
            if file.parent.name == REJECTED and file.exists():
                for reason, rows in pl.read_parquet(file, columns=["reason"])["reason"].value_counts().iter_rows():
                    self.stats.reject_reasons.add(reason, rows)
