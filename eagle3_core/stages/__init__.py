"""The DAG, declared once: every stage's name, what it reads, where it writes, and its shape.

    generate -> reconstruct -> vocab ─┐
                           └-> extract ┴> train -> evaluate

The pipeline flow and its config (a section per stage: ``PipelineConfig.<name>``, typed as the
stage's ``cfg``), the nightly, the CLI's stage commands, the recipes' ``stages`` list, the run
summary, the stage flows' parameter help and the deployments all read ``STAGES``; nothing else
states the stages, their order or their inputs. A stage is one line here plus its package
``eagle3_core/stages/<name>/`` whose ``stage.py`` holds ``<Name>Stage``, a ``driver.Stage`` (keys,
``plan() -> units``, ``run(unit)``, ``finish``), run by the one driver (``driver.StageRun``). Its
Prefect flow is built from the declaration and the class's parameters (``flows.stages.stage_flow``):
one task, or, where the declaration names its ``unit``, a task per unit (generate's one ``stream``
unit: the whole input in one task). ``tests/flows/test_adding_a_stage.py`` adds one that way, to a
copy of the tree, and runs it.
What a stage states for a config (the endpoints it asks, ``endpoint_field``; whether it would skip)
is asked of the stage built from its arguments (``StageSpec.build``), so no field here exists for
one stage only.

No Prefect here: the declarations are plain data, read by the flows.
"""

from __future__ import annotations

import importlib
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_core.config import PipelineConfig
    from eagle3_core.run.driver import Stage


def _target(c: PipelineConfig) -> dict[str, Any]:
    return {"target": c.target}


@dataclass(frozen=True)
class StageSpec:
    """One node of the DAG."""

    name: str
    folder: str  # the RunLayout folder it writes
    # its inputs, {argument: upstream stage} ("train/export": a folder inside train's); may depend on config
    inputs: Callable[[PipelineConfig], dict[str, str]]
    extra: Callable[[PipelineConfig], dict[str, Any]] = _target  # its other arguments in a run directory
    unit: str | None = None  # names its units ("shard": tasks extract-shard-00000, ...): a Prefect task each
    unit_limit: str | None = None  # a global concurrency limit each unit task holds a slot of ("gpu:{host}")
    # settles a choice the recipe left to the run, once upstream folders exist: (config, why) before it runs
    settle: Callable[[PipelineConfig], tuple[PipelineConfig, str | None]] | None = None

    @property
    def stage(self) -> str:
        """Its shape: ``eagle3_core.stages.<name>.stage:<Name>Stage``."""
        return f"eagle3_core.stages.{self.name}.stage:{self.name.capitalize()}Stage"

    @property
    def config_model(self) -> type:
        """Its config's model, the type of its stage's ``cfg``: the PipelineConfig section of its name."""
        return typing.get_type_hints(load(self.stage).__init__)["cfg"]

    def out(self, config: PipelineConfig) -> Path:
        """Its folder: the RunLayout property ``folder``, else ``folder`` under the run directory."""
        return getattr(config.layout, self.folder, None) or config.layout.root / self.folder

    def reads(self, config: PipelineConfig) -> tuple[str, ...]:
        """The stages whose folders it reads, in DAG order."""
        wanted = {upstream.split("/")[0] for upstream in self.inputs(config).values()}
        return tuple(s.name for s in STAGES if s.name in wanted)

    def section(self, config: PipelineConfig) -> Any:
        """Its config: the PipelineConfig section of its name."""
        return getattr(config, self.name)

    def arguments(self, config: PipelineConfig) -> dict[str, Any]:
        """Its flow's keyword arguments in a run directory."""
        section = self.section(config)
        folders = {argument: str(folder_of(upstream, config)) for argument, upstream in self.inputs(config).items()}
        return {"cfg": section, **folders, "out_dir": str(self.out(config)), **self.extra(config)}

    def build(self, config: PipelineConfig) -> Stage:
        """Its stage built from those arguments, to be asked what it states (the endpoints it asks,
        whether it would skip); nothing runs and its folder is not touched."""
        return load(self.stage)(**self.arguments(config))


def folder_of(upstream: str, config: PipelineConfig) -> Path:
    """``"train/export"`` -> the export/ folder inside train's; ``"vocab"`` -> vocab's folder."""
    stage, _, inside = upstream.partition("/")
    folder = BY_NAME[stage].out(config)
    return folder / inside if inside else folder


def load(reference: str) -> Any:
    """``"package.module:name"`` -> the object (imported on first use: torch stays out of --help)."""
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def _train_plan(c: PipelineConfig):
    """train.mode as the config holds it (auto until the extract stage's ``settle`` decides it)."""
    from eagle3_core.stages.train.plan import decide

    return decide(c.train.mode)


def _train_inputs(c: PipelineConfig) -> dict[str, str]:
    """Offline training reads hidden/ (extract); online training reads sequences/ itself."""
    return _train_plan(c).stage_inputs()


def _train_extra(c: PipelineConfig) -> dict[str, Any]:
    """The folder it does not wait for: sequences/ offline (provenance's), hidden/ in auto."""
    return {"target": c.target, **_train_plan(c).other_folders(c.layout.sequences, c.layout.hidden)}


def _evaluate_extra(c: PipelineConfig) -> dict[str, Any]:
    return {"target": c.target, "serve": c.serve, "generations_dir": str(c.layout.generations)}


def _settle_train_mode(c: PipelineConfig) -> tuple[PipelineConfig, str | None]:
    """train.mode auto, once sequences/ exist (``train.plan.decide``, with the sizes): offline when
    hidden/ is complete or fits on disk, else online-vllm, and extract is then left out (nothing is stored)."""
    from eagle3_core.stages.train.plan import Sizes, decide

    sizes = Sizes(c.target, c.layout.sequences, c.extract.disk_headroom)
    plan = decide(c.train.mode, c.layout.hidden, sizes)
    if not plan.chosen:
        return c, None
    stages = c.stages if plan.reads_hidden else [s for s in c.stages if s != "extract"]
    return c.model_copy(update={"train": plan.config(c.train), "stages": stages}), f"train.mode auto: {plan.why}"


STAGES: list[StageSpec] = [
    StageSpec(
        "generate",
        "generations",
        lambda c: {},
        lambda c: {"target": c.target},  # target: the pre-flight's tokenizer
        unit="stream",  # one unit, the whole input streamed: a task per request or batch would starve the server
    ),
    StageSpec("reconstruct", "sequences", lambda c: {"generations_dir": "generate"}),
    StageSpec("vocab", "vocab", lambda c: {"sequences_dir": "reconstruct"}),
    StageSpec(
        "extract",
        "hidden",
        lambda c: {"sequences_dir": "reconstruct"},
        unit="shard",
        unit_limit="gpu:{host}",  # two runs on one machine take turns with its accelerator
        settle=_settle_train_mode,
    ),
    StageSpec("train", "drafter", _train_inputs, _train_extra),
    StageSpec("evaluate", "eval", lambda c: {"export_dir": "train/export"}, _evaluate_extra),
]
BY_NAME: dict[str, StageSpec] = {s.name: s for s in STAGES}
STAGE_NAMES: tuple[str, ...] = tuple(BY_NAME)  # in DAG order


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
