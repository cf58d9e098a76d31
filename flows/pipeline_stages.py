"""How the pipeline calls each stage's flow: its folder, what it needs, and its arguments.

Guarantees:
- A stage whose flow (``flows/<stage>.py::<stage>_flow``) or core (``eagle3_core/<stage>/stage.py``)
  is not in the code base is reported ``not built``; it is never faked, and the stages that
  need its output are reported ``blocked``, not run on missing inputs.
- A stage runs only when every stage it needs has a ``complete`` manifest on disk (from this run
  or an earlier one), so a pipeline limited to some stages can reuse an earlier run's folders.
- Whether a stage's work is reused is decided by the stage itself (its ``run_<stage>`` checks
  its manifest); the pipeline only reports it (``reused`` when the manifest did not change).
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eagle3_core.config import PipelineConfig
from eagle3_core.layout import RunLayout
from eagle3_core.manifest import read_manifest

Status = Literal["ran", "reused", "failed", "not built", "blocked", "not selected"]


@dataclass(frozen=True)
class Stage:
    """One node of the DAG: where it writes, which stages it reads, how its flow is called.

    ``is_done``, where given, is the stage's own skip rule, asked before its flow starts: a stage
    whose flow needs a service to even begin (generate needs endpoints) is then reported reused
    without one being started for it.
    """

    name: str
    out: Callable[[RunLayout], Path]
    needs: tuple[str, ...]
    arguments: Callable[[PipelineConfig, RunLayout], dict[str, Any]]
    is_done: Callable[[PipelineConfig], bool] | None = None


def generate_is_done(config: PipelineConfig) -> bool:
    """True when the generate stage would skip itself, so vLLM need not be started for it."""
    from eagle3_core.generate.stage import is_complete

    return is_complete(config.generate, config.layout.generations)


def _train_needs(config: PipelineConfig) -> tuple[str, ...]:
    """Offline training reads hidden/ (extract); online training reads sequences/ itself."""
    return ("extract", "vocab") if config.train.mode == "offline" else ("reconstruct", "vocab")


STAGES: dict[str, Stage] = {s.name: s for s in [
    Stage("generate", lambda l: l.generations, (),
          lambda c, l: dict(cfg=c.generate, out=str(l.generations), progress_bar=sys.stderr.isatty()),
          is_done=generate_is_done),
    Stage("reconstruct", lambda l: l.sequences, ("generate",),
          lambda c, l: dict(cfg=c.reconstruct, target=c.target, generations_dir=str(l.generations),
                            out_dir=str(l.sequences))),
    Stage("vocab", lambda l: l.vocab, ("reconstruct",),
          lambda c, l: dict(cfg=c.vocab, target=c.target, sequences_dir=str(l.sequences),
                            out_dir=str(l.vocab))),
    Stage("extract", lambda l: l.hidden, ("reconstruct",),
          lambda c, l: dict(cfg=c.extract, target=c.target, sequences_dir=str(l.sequences),
                            out_dir=str(l.hidden))),
    Stage("train", lambda l: l.drafter, ("extract", "vocab"),
          lambda c, l: dict(cfg=c.train, target=c.target,
                            hidden_dir=str(l.hidden) if c.train.mode == "offline" else None,
                            vocab_dir=str(l.vocab), out_dir=str(l.drafter),
                            sequences_dir=str(l.sequences))),
    Stage("evaluate", lambda l: l.eval, ("train",),
          lambda c, l: dict(cfg=c.evaluate, target=c.target, export_dir=str(l.export),
                            out_dir=str(l.eval), serve=c.serve,
                            generations_dir=str(l.generations))),
]}


@dataclass
class Outcome:
    """What happened to one stage in one pipeline run (shown by the CLI and the summary artifact)."""

    stage: str
    status: Status
    out_dir: str
    seconds: float = 0.0
    started: float = 0.0
    reason: str = ""
    counts: dict[str, int] = field(default_factory=dict)


def load_stage_flow(name: str) -> Callable[..., Any] | None:
    """The stage's Prefect flow, or None when the stage is not built yet.

    Only a missing module *of that stage* means "not built"; any other import error is a bug in
    a built stage and is raised as is.
    """
    own = (f"flows.{name}", f"tasks.{name}", f"eagle3_core.{name}.stage")
    try:
        module = importlib.import_module(f"flows.{name}")
        importlib.import_module(f"eagle3_core.{name}.stage")
    except ModuleNotFoundError as exc:
        if exc.name in own:
            return None
        raise
    return getattr(module, f"{name}_flow", None)


def needs_of(stage: Stage, config: PipelineConfig) -> tuple[str, ...]:
    return _train_needs(config) if stage.name == "train" else stage.needs


def missing_inputs(stage: Stage, config: PipelineConfig) -> list[str]:
    """The stages this one reads whose folders hold no complete manifest."""
    layout = config.layout
    missing = []
    for need in needs_of(stage, config):
        manifest = read_manifest(STAGES[need].out(layout))
        if manifest is None or manifest.status != "complete":
            missing.append(need)
    return missing


def run_stage(name: str, config: PipelineConfig, outcomes: dict[str, Outcome]) -> Outcome:
    """Run one stage's flow (a subflow of the caller) unless it is unselected, unbuilt or blocked."""
    from prefect import get_run_logger

    stage, layout, logger = STAGES[name], config.layout, get_run_logger()
    outcome = Outcome(stage=name, status="not selected", out_dir=str(stage.out(layout)))
    outcomes[name] = outcome
    if name not in config.stages:
        return outcome
    stage_flow = load_stage_flow(name)
    if stage_flow is None:
        outcome.status, outcome.reason = "not built", f"flows/{name}.py or eagle3_core/{name}/stage.py is not in the code base yet"
        logger.warning("%s: not built (%s)", name, outcome.reason)
        return outcome
    if missing := missing_inputs(stage, config):
        outcome.status = "blocked"
        outcome.reason = "needs " + ", ".join(f"{m} ({outcomes[m].status if m in outcomes else 'not run'})" for m in missing)
        logger.warning("%s: blocked, %s", name, outcome.reason)
        return outcome
    if stage.is_done is not None and stage.is_done(config):
        outcome.status = "reused"
        outcome.counts = dict(read_manifest(stage.out(layout)).counts)
        logger.info("%s: complete for these inputs and config in %s, reused", name, outcome.out_dir)
        return outcome
    logger.info("%s: starting -> %s", name, outcome.out_dir)
    before = read_manifest(stage.out(layout))
    outcome.started = time.time()
    try:
        stage_flow(**stage.arguments(config, layout))
    except BaseException as exc:  # recorded for the summary, then raised unchanged
        outcome.status, outcome.reason = "failed", (str(exc).splitlines() or [type(exc).__name__])[0]
        raise
    finally:
        outcome.seconds = time.time() - outcome.started
    after = read_manifest(stage.out(layout))
    unchanged = before is not None and after is not None and before.updated_at == after.updated_at
    outcome.status = "reused" if unchanged and before.status == "complete" else "ran"
    outcome.counts = dict(after.counts) if after else {}
    logger.info("%s: %s in %.1f s", name, outcome.status, outcome.seconds)
    return outcome
