"""The generate stage: prompts -> ``accepted/`` and ``rejected/`` Parquet shards + ``manifest.json``.

Guarantees (docs/stages/generate.md, "The folder: generations/"):
- every input row ends accepted, rejected (with a reason code) or skipped (a repeated prompt):
  accepted + rejected + skipped == input, in the manifest;
- a sample is keyed by its prompt messages and sampling settings (``generations.sample_key``); a run
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
- ``GenerateStage`` is a ``driver.Stage`` that the one driver runs: an error leaves the manifest
  ``failed`` with the figures so far, an interrupt (Ctrl-C) ``running``, for the next run to resume;
- a manifest complete for the same config and input is returned without any work; the config's
  key holds the model that answers (its bytes when eagle3 serves it, else its served name, asked of
  the endpoints before the skip when ``generate.model`` is unset), never its path.

Its answers come from one of two sources behind one interface (``source.py``), chosen here once
(``source_for``): the endpoints (``served_source.py``) or the rows' own (``dataset_source.py``).
Its one unit streams the whole input through one engine (``request_loop.py``), so no boundary waits
for stragglers; its Prefect flow is built from its declaration like every stage's (the driver's
steps as the tasks ``generate-plan``, ``generate-stream``, ``generate-release``, ``generate-finish``).
It states the endpoints it sends to (``endpoints()``, ``endpoint_field``, as any stage that asks a
server would); given ``shared`` (``SharedLimits``) by whoever runs it (the flow's tasks,
``tasks/stage.py``), the run holds only its share of each endpoint's limit (``slots.py``). Given a
``target`` with a local tokenizer, the probe runs the pre-flight suite on each endpoint it finds up
(``eagle3_core.preflight``, built here from the target). Neither is a parameter: the parameters are the flow's form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_core.endpoint.slots import SharedLimits
from eagle3_core.errors import ConfigError
from eagle3_core.preflight.suite import generate_preflight
from eagle3_core.run.driver import Stage, drive
from eagle3_core.run.keys import stage_key
from eagle3_core.run.manifest import StageManifest
from eagle3_core.run.progress import Reporter
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.dataset_source import DatasetSource
from eagle3_core.stages.generate.served_source import ServedSource
from eagle3_core.stages.generate.source import Source
from eagle3_core.stages.generate.stats import RunStats
from eagle3_core.stages.generate.terminal import Fanout, TerminalProgress, wants_bar
from eagle3_core.target.config import TargetConfig

STAGE = "generate"
SHARDS = ("accepted/part-*.parquet", "rejected/part-*.parquet", "turns/part-*.parquet")
SOURCES: dict[str, type[Source]] = {"server": ServedSource, "dataset": DatasetSource}


def source_for(name: str) -> type[Source]:
    """``generate.source`` -> its source: the one place the string is branched on."""
    return SOURCES[name]


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
    def source(self) -> type[Source]:
        return source_for(self.cfg.source)

    @property
    def versions(self) -> tuple[str, ...]:
        return self.source.versions

    @property
    def endpoint_field(self) -> str | None:
        return self.source.endpoint_field

    def endpoints(self) -> dict[str, int]:
        return self.source.endpoints(self.cfg)

    def keys(self) -> tuple[str, dict[str, str]]:
        if self.cfg.prompts is None:
            raise ConfigError("generate needs prompts", fix="pass --input (a file, a directory or a dataset name)")
        self.cfg = self.source.settled(self.cfg)  # named once: the key and every request name the same model
        return stage_keys(self.cfg)

    def plan(self) -> list[None]:
        """The source's checks and the resume scan (the served source's probe first)."""
        # log lines reach the terminal through the reporter, so the bar does not echo them
        bar = [TerminalProgress(echo_logs=False)] if wants_bar() else []
        shown = Fanout(lambda: self.reporter, *bar)
        self.work = self.source(self.cfg, self.out_dir, shown, self.preflight)
        self.work.open()
        return [None]

    def run(self, unit: None) -> None:
        self.work.run_all(self.shared)

    def stopped(self, manifest: StageManifest) -> None:
        self.work.fill(manifest)

    def finish(self, manifest: StageManifest) -> None:
        self.work.finish(manifest)

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
    """The config hash and input fingerprints a finished run is recorded under, from its source's parts (the
    served source's hold the model that answers, asked of the endpoints when ``cfg`` names none)."""
    parts, inputs = source_for(cfg.source).key_parts(cfg)
    return stage_key(STAGE, GenerateStage.key_version, **parts), inputs
