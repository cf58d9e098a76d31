"""``generate.source: server``: each prompt sent to the endpoints, every answer kept with its reasoning.

What it adds to every source's contract (``source.py``; the stage's guarantees in ``stage.py``):
- the endpoints are probed before the first request (``probe.py``); one that is down is left out
  with a warning (its breaker starts open) as long as another answers; given a pre-flight, it runs
  on each endpoint that is up;
- an input whose first rows all match no known shape is one ``InputError`` before any request;
- a sample is keyed by its prompt messages and sampling settings (``generations.sample_key``), the model
  that answers included: its bytes when eagle3 serves it, else its served name; the run's key
  holds it too (``settled`` asks ``/models`` before the skip when ``generate.model`` is unset);
- one streaming engine sends every row (``request_loop.py``); given ``shared`` (``SharedLimits``), the
  run holds only its share of each endpoint's limit (``slots.py``);
- a prompt is settled only by its own answer (``health.py``): a run that ends with open rows ends
  failed (``StageError``: how many and why, in one line), and the next run sends them again;
- with ``generate.turns: all``, each conversation's earlier turns are checkpointed (``turns.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice
from typing import Any

from eagle3_core.chat.rows import RowRejection, has_past_tool_calls, normalize_prompt
from eagle3_core.contracts import generations
from eagle3_core.contracts.details import GenerateDetails
from eagle3_core.endpoint.client import Requester, run_coroutine
from eagle3_core.endpoint.concurrency import AimdController, Endpoint, EndpointPool, controller_for
from eagle3_core.endpoint.health import Breaker, states
from eagle3_core.endpoint.probe import ProbeReport, listed_model, probe_endpoints, probe_tools
from eagle3_core.endpoint.slots import SharedLimits, SlotKeeper
from eagle3_core.errors import ConfigError, EndpointError, InputError, StageError
from eagle3_core.prompts.inputs import count_rows, fingerprint, iter_rows
from eagle3_core.run.manifest import StageManifest
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.keys import key64
from eagle3_core.stages.generate.request_loop import Engine, WorkItem
from eagle3_core.stages.generate.shape import check_shape
from eagle3_core.stages.generate.source import Source
from eagle3_core.stages.generate.stats import RunStats
from eagle3_core.stages.generate.turns import TurnBook
from eagle3_core.target.config import CALLS_NO_TOOLS, PAST_TOOL_CALLS_UNRENDERED, TOOLS_NEED_THINKING_OFF

STAGE = "generate"


# why a row is never sent, by the reason the target gives (TargetConfig.tool_rows_refusal, past_tool_calls_refusal)
REFUSED_WHY = {
    TOOLS_NEED_THINKING_OFF: "the target calls tools only with thinking off (target.tools_while_thinking: false, "
    "DeepSeek-V3.1) and this run thinks: its answer would be off the model's distribution",
    CALLS_NO_TOOLS: "the target writes no tool calls (target.calls_tools: false: its tokenizer has no tool-call "
    "tokens, as the DeepSeek-R1 distills'): its answer would be off the model's distribution",
    PAST_TOOL_CALLS_UNRENDERED: "an earlier assistant turn calls a tool, which the target's template cannot render as "
    "vLLM hands it (target.renders_past_tool_calls: false, DeepSeek-R1): the server would answer HTTP 400",
}


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


class ServedSource(Source):
    """One pass over the input through the endpoints."""

    versions = ("openai", "polars", "httpx")
    endpoint_field = "base_urls"

    @staticmethod
    def key_parts(cfg: GenerateConfig) -> tuple[dict[str, Any], dict[str, str]]:
        """Endpoint URLs are left out on purpose: the same prompts and sampling served on another port
        (a second demo, a moved server) are the same samples. The model that answers is in (its bytes
        when eagle3 serves it, else its served name: ``settled``), so another model is asked again."""
        cfg = ServedSource.settled(cfg)
        parts = {
            "sampling": cfg.sampling_key(),
            "prompts": cfg.prompts,  # its input's bytes are the fingerprint, not its path
            "require_reasoning": cfg.require_reasoning,
            "refuse_tool_rows": cfg.refuse_tool_rows,
            "refuse_past_tool_calls": cfg.refuse_past_tool_calls,
        }
        return parts, {"prompts": fingerprint(cfg.prompts)}

    @staticmethod
    def settled(cfg: GenerateConfig) -> GenerateConfig:
        """``cfg`` naming the model that answers: as given when ``generate.model`` or the target's bytes
        (``model_fingerprint``, the pipeline's served target) name it or no endpoint is set (the run
        then stops on that), else the name the endpoints list, asked now (one ``GET /models``): the
        skip is decided before the probe, and a rerun against a server that now serves another
        model must ask it, not skip."""
        if cfg.model or cfg.model_fingerprint or not cfg.base_urls:
            return cfg
        try:
            model = listed_model(cfg, cfg.base_urls)
        except EndpointError:
            next(iter_rows(cfg.prompts), None)  # an input that is not there is the error to fix first
            raise
        return cfg.model_copy(update={"model": model})

    @staticmethod
    def endpoints(cfg: GenerateConfig) -> dict[str, int]:
        slots = controller_for(cfg).max  # the most this run keeps in flight on an endpoint
        return dict.fromkeys(cfg.base_urls, slots)

    # ---- phases -------------------------------------------------------------------------

    def open(self) -> None:
        """Probe, resume scan, the engine (the driver writes `running` after)."""
        self._check_input()
        t0 = time.monotonic()
        self.probe: ProbeReport = probe_endpoints(self.cfg, self.cfg.base_urls)
        self.reporter.log(self.probe.line())
        for url, why in self.probe.down.items():
            self.reporter.log(f"generate: warning: {url} is left out for now ({why}); it joins when it answers")
        if (tools := first_tools(self.cfg)) is not None:
            self.reporter.log(probe_tools(self.cfg, self.probe, tools))
        self.timings["probe"] = round(time.monotonic() - t0, 3)
        self.model = self.probe.model
        self.preflight_lines: list[str] = []
        self._preflight()
        self.sampling = self.cfg.model_copy(update={"model": self.model}).sampling_key()
        self.pool = EndpointPool([self._endpoint(url) for url in self.cfg.base_urls])
        self._open_writers()
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
        """Every source's scan, then the open rows to send again and the earlier turns on disk."""
        super()._scan_folder()
        if self.resent:
            self.reporter.log(f"generate: {self.resent} earlier rejects were left open: sending them again")
        self.turn_book = TurnBook(self.out_dir, self.cfg)  # generate.turns: all (turns.py)
        self.stats.turns_resumed = self.turn_book.scan(lambda key: self.persisted.get(key) is not None)
        if self.stats.turns_resumed:
            self.reporter.log(f"generate: {self.stats.turns_resumed} earlier turns already on disk: not asked again")

    def _writers(self) -> tuple:
        return self.accepted, self.rejected, self.turn_book

    def _produce(self, shared: SharedLimits | None) -> None:
        """Every row through one engine; with ``shared``, within this run's share of each limit."""
        keeper = None
        if shared is not None:
            keeper = SlotKeeper(
                shared,
                self.pool,
                self.cfg.limit_lease_seconds,
                has_unstarted=lambda: self.engine.unstarted,
                on_error=self.reporter.log,
            )
        run_coroutine(self.engine.process(self._plan(enumerate(iter_rows(self.cfg.prompts))), keeper))

    def finish(self, manifest: StageManifest) -> None:
        """Flush, drop what earlier runs left for other prompts, fill the manifest, or fail with
        one line when prompts are still open (the driver records it ``failed``)."""
        self._settle_folder()
        self.turn_book.drop_stale(self._seen.__contains__)
        self.timings["generate"] = round(time.monotonic() - self._t_generate, 3)
        self.fill(manifest)
        self._report()
        if self.stats.open:
            raise open_error(self.stats)

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
            if not isinstance(prompt, RowRejection) and (reason := self._refused(*prompt)):
                prompt = RowRejection(reason, REFUSED_WHY[reason])  # never sent
            if isinstance(prompt, RowRejection):
                self._reject_unkeyed(index, row, prompt)
                continue
            messages, tools = prompt
            key = generations.sample_key(messages, self.sampling, tools)
            if self._is_new(key64(key)):
                yield WorkItem(index, key, messages, row, tools, self.turn_book.conversation(key, messages))

    def _refused(self, messages: list[dict], tools: list[dict] | None) -> str | None:
        """Why the target's rules keep this prompt from the server (a reject reason), None to send it: rows with
        tools off its distribution, or an earlier tool call its template cannot render."""
        if tools and self.cfg.refuse_tool_rows:
            return self.cfg.refuse_tool_rows
        if self.cfg.refuse_past_tool_calls and has_past_tool_calls(messages):
            return self.cfg.refuse_past_tool_calls
        return None

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
