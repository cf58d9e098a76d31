"""The DAG, declared once: every stage's name, what it reads, where it writes, and its body.

    generate -> reconstruct -> vocab ─┐
                           └-> extract ┴> train -> evaluate

The pipeline flow, the nightly, the CLI's stage commands, the recipes' ``stages`` list and
the deployments all read ``STAGES``; nothing else states the order or the inputs. A stage is
one declaration here plus its module ``eagle3_core/<name>/stage.py`` with the body
``run_<name>(cfg, ..., out_dir, reporter=None) -> StageManifest``, which runs through the one
lifecycle (``eagle3_core.lifecycle``). A stage that splits into several Prefect tasks (one per
shard, one per batch) names its own flow; every other stage gets a flow built from its body
(``flows.stages.stage_flow``).

No Prefect here: the declarations are plain data, read by the flows.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_core.config import PipelineConfig


@dataclass(frozen=True)
class StageSpec:
    """One node of the DAG."""

    name: str
    folder: str  # the RunLayout folder it writes
    reads: Callable[[PipelineConfig], tuple[str, ...]]  # the stages whose folders it reads (may depend on config)
    arguments: Callable[[PipelineConfig], dict[str, Any]]  # its flow's keyword arguments in a run directory
    flow: str | None = None  # "module:function" of its own flow; None = one task calling run_<name>
    # reads from the target served by vLLM (which the pipeline starts when `serve` is set) for this config
    served: Callable[[PipelineConfig], bool] = lambda c: False
    is_done: Callable[[PipelineConfig], bool] | None = None  # its skip rule, asked before a service starts for it
    # settles a choice the recipe left to the run, once upstream folders exist: (config, why) before it runs
    settle: Callable[[PipelineConfig], tuple[PipelineConfig, str | None]] | None = None

    @property
    def run(self) -> str:
        """Its body: ``eagle3_core.<name>.stage:run_<name>``."""
        return f"eagle3_core.{self.name}.stage:run_{self.name}"

    def out(self, config: PipelineConfig) -> Path:
        return getattr(config.layout, self.folder)


def load(reference: str) -> Any:
    """``"package.module:name"`` -> the object (imported on first use: torch stays out of --help)."""
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def _generate_is_done(c: PipelineConfig) -> bool:
    from eagle3_core.generate.stage import is_complete

    return is_complete(c.generate, c.layout.generations)


def _train_reads(c: PipelineConfig) -> tuple[str, ...]:
    """Offline training reads hidden/ (extract); online training reads sequences/ itself."""
    return ("extract", "vocab") if c.train.mode == "offline" else ("reconstruct", "vocab")


def _settle_train_mode(c: PipelineConfig) -> tuple[PipelineConfig, str | None]:
    """train.mode auto, once sequences/ exist: offline when hidden/ is complete or fits on disk,
    else online-vllm, and extract is then left out (nothing is stored)."""
    from eagle3_core.manifest import read_manifest
    from eagle3_core.train.sources import choose_mode

    sequences = read_manifest(c.layout.sequences)
    if c.train.mode != "auto" or sequences is None or sequences.status != "complete":
        return c, None
    train, why = choose_mode(c.train, c.target, c.layout.sequences, c.layout.hidden, c.extract.disk_headroom)
    stages = c.stages if train.mode == "offline" else [s for s in c.stages if s != "extract"]
    return c.model_copy(update={"train": train, "stages": stages}), f"train.mode auto: {why}"


STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        "generate",
        "generations",
        lambda c: (),
        lambda c: dict(cfg=c.generate, out=str(c.layout.generations), progress_bar=sys.stderr.isatty()),
        flow="flows.generate:generate_flow",
        served=lambda c: c.generate.source == "server",  # `dataset` takes the rows' own answers
        is_done=_generate_is_done,
    ),
    StageSpec(
        "reconstruct",
        "sequences",
        lambda c: ("generate",),
        lambda c: dict(
            cfg=c.reconstruct,
            target=c.target,
            generations_dir=str(c.layout.generations),
            out_dir=str(c.layout.sequences),
        ),
        flow="flows.reconstruct:reconstruct_flow",
    ),
    StageSpec(
        "vocab",
        "vocab",
        lambda c: ("reconstruct",),
        lambda c: dict(
            cfg=c.vocab, target=c.target, sequences_dir=str(c.layout.sequences), out_dir=str(c.layout.vocab)
        ),
    ),
    StageSpec(
        "extract",
        "hidden",
        lambda c: ("reconstruct",),
        lambda c: dict(
            cfg=c.extract, target=c.target, sequences_dir=str(c.layout.sequences), out_dir=str(c.layout.hidden)
        ),
        flow="flows.extract:extract_flow",
        settle=_settle_train_mode,
    ),
    StageSpec(
        "train",
        "drafter",
        _train_reads,
        lambda c: dict(
            cfg=c.train,
            target=c.target,
            hidden_dir=str(c.layout.hidden) if c.train.mode in ("offline", "auto") else None,
            vocab_dir=str(c.layout.vocab),
            out_dir=str(c.layout.drafter),
            sequences_dir=str(c.layout.sequences),
        ),
        flow="flows.train:train_flow",
    ),
    StageSpec(
        "evaluate",
        "eval",
        lambda c: ("train",),
        lambda c: dict(
            cfg=c.evaluate,
            target=c.target,
            export_dir=str(c.layout.export),
            out_dir=str(c.layout.eval),
            serve=c.serve,
            generations_dir=str(c.layout.generations),
        ),
        flow="flows.evaluate:evaluate_flow",
    ),
)

STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
BY_NAME: dict[str, StageSpec] = {s.name: s for s in STAGES}


def upstream_of(name: str, config: PipelineConfig) -> list[str]:
    """Every stage ``name`` depends on, directly or not, in DAG order."""
    found: set[str] = set()
    todo = list(BY_NAME[name].reads(config))
    while todo:
        stage = todo.pop()
        if stage not in found:
            found.add(stage)
            todo += BY_NAME[stage].reads(config)
    return [s for s in STAGE_NAMES if s in found]
