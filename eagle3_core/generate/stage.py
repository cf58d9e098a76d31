"""The generate stage: prompts -> ``accepted/`` and ``rejected/`` Parquet shards + ``manifest.json``.

Guarantees (DESIGN.md, CONTRIBUTING.md):
- every input row ends accepted, rejected (with a reason code) or skipped (a repeated prompt):
  accepted + rejected + skipped == input, in the manifest;
- a sample is keyed by its prompt messages and sampling settings (``chat.rows.sample_id``); a run
  started again after a kill reads the keys of every durable shard first and requests none of
  them again, so no sample is written twice; rows an earlier run left for other prompts or
  settings (another temperature, a smaller ``max_samples``) leave the folder at finish;
- a prompt is settled only by its own answer (``endpoint/health.py``): a reject for a failure of the
  server or the path to it is *open*, and a run that ends with open rows ends failed
  (``StageError``: how many and why, in one line); the next run in the folder sends them again
  and drops the old rows at finish. An outage (every endpoint down for ``outage_seconds``) or a
  failure every request shares stops the run instead of rejecting the rest of the input;
- the endpoints are probed before the first request (``probe.py``); one that is down is left out
  with a warning (its breaker starts open) as long as another answers;
- an input whose first rows all match no known shape is one ``InputError`` before any request;
- ``GenerateStage`` is a ``lifecycle.Stage`` that the one driver runs: an error leaves the manifest
  ``failed`` with the figures so far, an interrupt (Ctrl-C) ``running``, for the next run to resume;
- a manifest complete for the same config and input is returned without any work.

Its one unit streams the whole input through one engine (``engine.py``), so no boundary waits
for stragglers; its Prefect flow is built from its declaration like every stage's (the driver's
steps as the tasks ``generate-plan``, ``generate-stream``, ``generate-release``, ``generate-finish``).
Given ``shared`` (``SharedLimits``), the run holds only its share of each endpoint's limit
(``slots.py``), set on the stage by whoever runs it (the flow's ``tasks/generate.py:prepare``), not
passed as a parameter: the parameters are the flow's form. Given a ``target`` with a local tokenizer,
the probe runs the pre-flight suite on each endpoint it finds up (``eagle3_core.preflight``, built
here from the target).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from eagle3_core.chat.rows import RowRejection, normalize_prompt, sample_id
from eagle3_core.contracts.details import GenerateDetails
from eagle3_core.endpoint.client import Requester, run_coroutine
from eagle3_core.endpoint.concurrency import AimdController, Endpoint, EndpointPool, controller_for
from eagle3_core.endpoint.health import Breaker, states
from eagle3_core.errors import ConfigError, InputError, StageError
from eagle3_core.generate.config import GenerateConfig
from eagle3_core.generate.engine import Engine, WorkItem, rejected_record
from eagle3_core.generate.keys import KeySet, key64
from eagle3_core.generate.probe import ProbeReport, probe_endpoints, probe_tools
from eagle3_core.generate.shape import check_shape
from eagle3_core.generate.shards import ACCEPTED, REJECTED, ShardWriter, drop_stale, read_persisted, shard_files
from eagle3_core.generate.slots import SharedLimits, SlotKeeper
from eagle3_core.generate.stats import RunStats
from eagle3_core.generate.terminal import Fanout, TerminalProgress, wants_bar
from eagle3_core.generate.turns import TurnBook
from eagle3_core.lifecycle import Stage, StageRun, drive
from eagle3_core.manifest import StageManifest
from eagle3_core.preflight.suite import generate_preflight
from eagle3_core.progress import Reporter
from eagle3_core.prompts.inputs import count_rows, fingerprint, iter_rows
from eagle3_core.stage_key import config_hash as config_hash_of
from eagle3_core.target import TargetConfig

STAGE = "generate"
SHARDS = ("accepted/part-*.parquet", "rejected/part-*.parquet", "turns/part-*.parquet")


@dataclass
class GenerateStage(Stage):
    """Send every prompt to the endpoints (or take the rows' own answers); keep each answer with its reasoning."""

    name, shards = STAGE, SHARDS
    outputs = ()  # nothing is cleared on changed keys: rows carry their keys, and finish drops the stale ones
    changed = "rows on disk are kept by their keys; those for other prompts or settings go at finish"

    cfg: GenerateConfig
    out_dir: str
    reporter: Reporter | None = None
    # the pre-flight's tokenizer (a local target.path), and the chat settings every request sends
    target: TargetConfig | None = None
    shared: SharedLimits | None = field(default=None, init=False)  # the endpoints' limits, shared with other runs
    # run on each endpoint the probe finds up, before the first prompt: the pre-flight suite of
    # `eagle3 probe --recipe` (preflight.suite.generate_preflight), a line of its report back; built from `target`
    preflight: Callable[[GenerateConfig, str], str] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.target is not None:  # the flow's target: its chat settings are what every request sends
            try:
                self.cfg = self.cfg.with_target(self.target)
            except ValueError as exc:
                raise ConfigError(str(exc), fix="set them in target.chat only") from None
        self.preflight = generate_preflight(self.target)

    @property
    def versions(self) -> tuple[str, ...]:
        return ("polars",) if self.cfg.source == "dataset" else ("openai", "polars", "httpx")

    def keys(self) -> tuple[str, dict[str, str]]:
        if self.cfg.prompts is None:
            raise ConfigError("generate needs prompts", fix="pass --input (a file, a directory or a dataset name)")
        return stage_keys(self.cfg)

    def plan(self) -> list[None]:
        """The probe and the resume scan (the served path), or the answers' check (the dataset's)."""
        # log lines reach the terminal through the reporter, so the bar does not echo them
        bar = [TerminalProgress(echo_logs=False)] if wants_bar() else []
        shown = Fanout(lambda: self.reporter, *bar)
        if self.cfg.source == "dataset":  # the rows' own answers, no server (dataset_source.py)
            from eagle3_core.generate.dataset_source import DatasetRun

            self.work = DatasetRun(self.cfg, self.out_dir, shown)
        else:
            self.work = ServedRun(self.cfg, self.out_dir, shown, self.preflight)
        self.work.open()
        return [None]

    def run(self, unit: None) -> None:
        self.work.run_all(self.shared)

    def stopped(self, manifest: StageManifest) -> None:
        self.work.fill(manifest)

    def finish(self, manifest: StageManifest) -> None:
        self.work.finish(manifest)

    def close(self) -> None:
        if self.shared is not None:
            self.shared.close()

    @property
    def stats(self) -> RunStats:
        return self.work.stats


def run_generate(
    cfg: GenerateConfig, out_dir: str | Path, reporter: Reporter | None = None, target: TargetConfig | None = None
) -> StageManifest:
    """Generate every prompt of ``cfg.prompts`` into ``out_dir``; resume or skip when possible. Given a
    ``target`` (as the pipeline gives it), its chat settings are sent and its pre-flight runs."""
    return drive(GenerateStage(cfg, out_dir, reporter, target))


def stage_keys(cfg: GenerateConfig) -> tuple[str, dict[str, str]]:
    """The config hash and input fingerprints a finished run is recorded under.

    Endpoint URLs are left out on purpose: the same prompts and sampling served on another port
    (a second demo, a moved server) are the same samples.
    """
    if cfg.source == "dataset":  # keyed apart from every served run (dataset_source.py)
        from eagle3_core.generate import dataset_source

        return dataset_source.stage_keys(cfg)
    config_hash = config_hash_of(
        sampling=cfg.sampling_key(),
        prompts=cfg.prompts.model_dump(mode="json"),  # its input's bytes are the fingerprint, not its path
        require_reasoning=cfg.require_reasoning,
        **({"refuse_tool_rows": True} if cfg.refuse_tool_rows else {}),  # unset: the keys stay as they were
    )
    return config_hash, {"prompts": fingerprint(cfg.prompts)}


def is_complete(cfg: GenerateConfig, out_dir: str | Path) -> bool:
    """True when ``out_dir`` already holds a complete run for this config: no endpoint is needed."""
    return cfg.prompts is not None and StageRun(GenerateStage(cfg, out_dir)).life.would_skip()


TOOLS_NEED_THINKING_OFF = "tools_need_thinking_off"
TOOLS_REFUSED_WHY = (
    "the target calls tools only with thinking off (target.tools_while_thinking: false, DeepSeek-V3.1) and this run "
    "thinks: its answer would be off the model's distribution"
)


TOOLS_SCAN_ROWS = 10_000  # rows read for the tools probe: a read of the whole input before every run costs too much


def first_tools(cfg: GenerateConfig) -> list[dict] | None:
    """The ``tools`` of the first row among the input's first ``TOOLS_SCAN_ROWS`` that carries some, None
    when none does or none is sent. A tools row past them on a server that refuses tools is a final
    ``http_400`` reject with the server's words, not a stop before the run."""
    if cfg.refuse_tool_rows:
        return None
    for row in islice(iter_rows(cfg.prompts), TOOLS_SCAN_ROWS):
        found = normalize_prompt(row)
        if not isinstance(found, RowRejection) and found[1]:
            return found[1]
    return None


class ServedRun:
    """One pass over the input through the endpoints; its phases are ``GenerateStage``'s."""

    def __init__(
        self, cfg: GenerateConfig, out_dir: Path, reporter: Reporter, preflight: Callable | None = None
    ) -> None:
        self.cfg, self.out_dir, self.reporter = cfg, out_dir, reporter
        self.preflight = preflight
        self.preflight_lines: list[str] = []
        self.stats = RunStats()
        self.timings: dict[str, float] = {}
        self._seen = KeySet()  # keys of this pass, 8 bytes each (keys.py)
        self._bad_rows: set[int] = set()  # row indices of this pass's unkeyed rejects already on disk

    # ---- phases -------------------------------------------------------------------------

    def open(self) -> None:
        """Probe, resume scan, the engine (the driver writes `running` after)."""
        self._check_input()
        t0 = time.monotonic()
        self.probe: ProbeReport = probe_endpoints(self.cfg)
        self.reporter.log(self.probe.line())
        for url, why in self.probe.down.items():
            self.reporter.log(f"generate: warning: {url} is left out for now ({why}); it joins when it answers")
        if (tools := first_tools(self.cfg)) is not None:
            self.reporter.log(probe_tools(self.cfg, self.probe, tools))
        self.timings["probe"] = round(time.monotonic() - t0, 3)
        self.model = self.probe.model
        self._preflight()
        self.sampling = self.cfg.model_copy(update={"model": self.model}).sampling_key()
        self.pool = EndpointPool([self._endpoint(url) for url in self.cfg.base_urls])
        self.accepted = ShardWriter(self.out_dir / ACCEPTED, ACCEPTED, self.cfg.shard_rows, self.cfg.flush_seconds)
        self.rejected = ShardWriter(self.out_dir / REJECTED, REJECTED, self.cfg.shard_rows, self.cfg.flush_seconds)
        self._scan_folder()
        self.total = count_rows(self.cfg.prompts)
        # the probe refused an endpoint that answers without reasoning: past it, an answer without is the prompt's
        ruled_out = frozenset({"empty_reasoning"}) if self.cfg.require_reasoning else frozenset()
        requester = Requester(
            self.cfg, self.model, self.pool, self._on_retry, ruled_out=ruled_out, warn=self.reporter.log
        )
        self.engine = Engine(
            requester,
            self.pool,
            self.accepted,
            self.rejected,
            self.stats,
            self.model,
            self._report,
            self._on_shard,
            turns=self.turn_book.writer,
        )
        self._t_generate = time.monotonic()

    def _preflight(self) -> None:
        """The pre-flight suite on each endpoint that is up (4 short requests each, ``preflight/suite.py``)."""
        if self.preflight is None:
            return
        t0 = time.monotonic()
        gen = self.cfg.model_copy(update={"model": self.model})
        for url in self.cfg.base_urls:
            if url not in self.probe.down:
                line = self.preflight(gen, url)
                self.preflight_lines.append(line)
                self.reporter.log(f"generate: {line}")
        self.timings["preflight"] = round(time.monotonic() - t0, 3)

    def _check_input(self) -> None:
        """Before the probe: an endpoint, some rows, and rows of a known shape."""
        if not self.cfg.base_urls:
            raise ConfigError(
                "generate needs at least one endpoint: base_urls is empty",
                fix="set base_urls to your servers (http://host:port/v1): generate.base_urls in a recipe, cfg.base_urls "
                "in the Prefect form, --base-url on the command line",
            )
        if next(iter_rows(self.cfg.prompts), None) is None and not self.cfg.allow_empty:
            raise InputError(
                f"the input holds no rows: {self.cfg.prompts.input}",
                path=self.cfg.prompts.input,
                fix="pass a non-empty input, or accept an empty run with --allow-empty "
                "(generate.allow_empty: true in a recipe)",
            )
        check_shape(self.cfg.prompts)

    def _scan_folder(self) -> None:
        """What earlier runs left here: the rows to skip, and the open ones to send again."""
        self.persisted, self.unkeyed, self.resent = read_persisted(self.out_dir)
        self._earlier = shard_files(self.out_dir / ACCEPTED) + shard_files(self.out_dir / REJECTED)
        if self.persisted or self.unkeyed:
            self.reporter.log(f"generate: resuming; {len(self.persisted) + len(self.unkeyed)} rows already on disk")
        if self.resent:
            self.reporter.log(f"generate: {self.resent} earlier rejects were left open: sending them again")
        self.turn_book = TurnBook(self.out_dir, self.cfg)  # generate.turns: all (turns.py)
        self.stats.turns_resumed = self.turn_book.scan(lambda key: self.persisted.get(key) is not None)
        if self.stats.turns_resumed:
            self.reporter.log(f"generate: {self.stats.turns_resumed} earlier turns already on disk: not asked again")

    def run_all(self, shared: SharedLimits | None = None) -> None:
        """Every row through one engine; with ``shared``, within this run's share of each limit.
        Whatever stops it, the finished rows are flushed and the manifest filled, so the
        lifecycle's ``failed`` (or an interrupt's ``running``) records what was done."""
        keeper = None
        if shared is not None:
            keeper = SlotKeeper(
                shared,
                self.pool,
                self.cfg.limit_lease_seconds,
                has_unstarted=lambda: self.engine.unstarted,
                on_error=self.reporter.log,
            )
        try:
            run_coroutine(self.engine.process(self._plan(enumerate(iter_rows(self.cfg.prompts))), keeper))
        except BaseException:
            self._flush_what_finished()
            raise

    def finish(self, manifest: StageManifest) -> None:
        """Flush, drop what earlier runs left for other prompts, fill the manifest, or fail with
        one line when prompts are still open (the driver records it ``failed``)."""
        self.accepted.flush()
        self.rejected.flush()
        self.turn_book.flush()
        self._drop_stale()
        self.turn_book.drop_stale(self._seen.__contains__)
        self._count_resumed_reasons()
        self.timings["generate"] = round(time.monotonic() - self._t_generate, 3)
        self.fill(manifest)
        self._report()
        if self.stats.open:
            raise open_error(self.stats)

    def _flush_what_finished(self) -> None:
        """Best effort (a full disk may refuse it): the rows that finished stay on disk."""
        try:
            self.accepted.flush()
            self.rejected.flush()
            self.turn_book.flush()
        except Exception:
            pass

    # ---- pieces ---------------------------------------------------------------------------

    def _controller(self) -> AimdController:
        return controller_for(self.cfg)

    def _endpoint(self, url: str) -> Endpoint:
        cfg = self.cfg
        endpoint = Endpoint(
            url, self._controller(), breaker=Breaker(cfg.breaker_failures, cfg.breaker_backoff, cfg.breaker_max_backoff)
        )
        # an endpoint left out was not asked its names: those the others list for the model
        every_name = frozenset({self.model}).union(*self.probe.names.values())
        endpoint.model_names = self.probe.names.get(url, every_name)
        if url in self.probe.down:
            endpoint.breaker.trip()  # left out until a half-open probe finds it up
        return endpoint

    def _plan(self, rows: Iterator[tuple[int, object]]) -> Iterator[WorkItem]:
        """Rows -> work: rejects malformed rows, skips repeats, passes over persisted samples."""
        for index, row in rows:
            self.stats.input_rows += 1
            prompt = normalize_prompt(row)
            if self.cfg.refuse_tool_rows and not isinstance(prompt, RowRejection) and prompt[1]:
                prompt = RowRejection(TOOLS_NEED_THINKING_OFF, TOOLS_REFUSED_WHY)  # never sent: off distribution
            if isinstance(prompt, RowRejection):
                if index in self.unkeyed:
                    self._bad_rows.add(index)
                    self.stats.resume(REJECTED)
                else:
                    if self.rejected.add(rejected_record(None, index, row, prompt.reason, prompt.detail)):
                        self.rejected.flush()  # a long run of bad rows never yields to the loop
                    self.stats.reject(prompt.reason)
                continue
            messages, tools = prompt
            key = sample_id(messages, self.sampling, tools)
            short = key64(key)
            if short in self._seen:
                self.stats.skip()
            elif (outcome := self.persisted.get(short)) is not None:
                self._seen.add(short)
                self.stats.resume(outcome)
            else:
                self._seen.add(short)
                yield WorkItem(index, key, messages, row, tools, self.turn_book.conversation(key, messages))

    def _drop_stale(self) -> None:
        """Rows an earlier run here wrote for prompts this run does not have (another sampling
        config, a smaller max_samples, an edited input) leave the folder: readers take every row
        of accepted/, and mixing them in would train on samples this run never asked for."""
        if self.stats.resumed == len(self.persisted) + len(self.unkeyed) and not self.resent:
            return  # every row on disk belongs to this run
        dropped = drop_stale(self._earlier, self._seen.__contains__, self._bad_rows)
        self.reporter.log(
            f"generate: dropped {dropped} earlier rows ({self.resent} open rows this run sent again; "
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

    def _on_retry(self, reason: str) -> None:
        self.stats.retries[reason] += 1

    def _on_shard(self, kind: str, name: str, rows: int) -> None:
        self.reporter.log(f"generate: {kind}/{name} written ({rows} rows; {self.stats.done} of {self.total} done)")

    def _report(self) -> None:
        elapsed = max(time.monotonic() - self.stats.started, 1e-9)
        self.reporter.progress(
            STAGE,
            self.stats.done,
            self.total,
            in_flight=self.pool.in_flight,
            rejected=self.stats.outcomes["rejected"],
            open=self.stats.outcomes["open"],
            rate=round(self.stats.done / elapsed, 2),
            endpoints="; ".join(f"{url} {state}" for url, state in self._states().items()),
        )

    def _states(self) -> dict[str, str]:
        return states({e.url: e.breaker for e in self.pool.endpoints})

    def fill(self, manifest: StageManifest) -> None:
        """The run's figures into the running manifest (the driver writes it)."""
        manifest.counts = self.stats.counts()
        manifest.timings = dict(self.timings)
        details = self.stats.details() | {
            "model": self.model,
            "probe": self.probe.line(),
            "preflight": self.preflight_lines,
            "endpoints_down_at_start": self.probe.down,
            "reasoning_layouts": self.probe.layouts,
            "token_id_layouts": self.probe.id_layouts,
            "chat": self.cfg.chat.model_dump(mode="json"),
            "concurrency": self.cfg.concurrency,
            "concurrency_timeline": {e.url: e.controller.timeline for e in self.pool.endpoints},
            "requests_per_endpoint": {e.url: e.requests for e in self.pool.endpoints},
            "endpoint_states": self._states(),
            "breaker_opened": {e.url: e.breaker.opened for e in self.pool.endpoints},
            "rows_per_s": round(self.stats.done / max(time.monotonic() - self.stats.started, 1e-9), 3),
        }
        manifest.details = GenerateDetails(**details).dump()


def open_error(stats: RunStats) -> StageError:
    """One line: how many prompts are open and why; the rerun sends them."""
    count = "1 prompt is" if stats.open == 1 else f"{stats.open} prompts are"
    return StageError(
        f"{count} still open ({stats.open_line()}): the servers failed them, not their answers; "
        "run the same command again to send them"
    )
