"""``train.mode``, decided once: the one place the mode string is branched on.

``decide`` turns the configured mode into a ``TrainPlan`` (the mode training runs in, and why, in
words). Everything that depends on the mode reads the plan, never the string: the DAG declaration
(the folder train waits for, whether extract runs: ``eagle3_core.stages``), the CLI (what
``--input`` is), the stage (its ``HiddenSource``, ``sources.source_for``, a lookup by the settled name)
and, through the source, provenance and the config hash.

auto's rule, whoever asks: a complete hidden/ written by extract is used as it is (offline); else,
where the sizes are known before extract runs (the pipeline: sequences/ complete, the target's
hidden size, the free space where hidden/ would go, with extract's headroom), offline when the
states fit and online-vllm when not; else (the stage, the CLI: nothing is extracted any more)
online-vllm. auto stays auto only where nothing can decide yet (the pipeline before sequences/).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle3_core.stages.train.hidden_sources import SOURCES, HiddenShards, HiddenSource, Spooled, source_for
from eagle3_core.target.config import TargetConfig

AUTO = "auto"


@dataclass(frozen=True)
class Sizes:
    """What auto weighs before extract runs: the tokens of sequences/, the target's width, the disk."""

    target: TargetConfig
    sequences_dir: str | Path
    headroom: float  # extract.disk_headroom: the free space asked for, as a multiple of the states' bytes


@dataclass(frozen=True)
class TrainPlan:
    """The mode training runs in (offline, online, online-vllm; auto while undecided) and why."""

    mode: str
    why: str
    chosen: bool = False  # auto decided it here (the run says so, with ``why``)

    @property
    def undecided(self) -> bool:
        return self.mode == AUTO

    @property
    def source(self) -> type[HiddenSource]:
        return source_for(self.mode)

    @property
    def reads_hidden(self) -> bool:
        """Whether training reads hidden/ (offline), so extract must have written it."""
        return self.mode in SOURCES and SOURCES[self.mode].reads_hidden

    def config(self, cfg):
        """``cfg`` (a TrainConfig) with the mode settled."""
        return cfg.model_copy(update={"mode": self.mode})

    def stage_inputs(self) -> dict[str, str]:
        """The DAG: {argument: upstream stage} train waits for: hidden/ offline, else sequences/."""
        if self.reads_hidden:
            return {"hidden_dir": "extract", "vocab_dir": "vocab"}
        return {"vocab_dir": "vocab", "sequences_dir": "reconstruct"}

    def other_folders(self, sequences: Path, hidden: Path) -> dict[str, str | None]:
        """The folders it is given without waiting for them: sequences/ offline (provenance reads
        its manifest), hidden/ while undecided (a complete one decides offline in the stage)."""
        if self.reads_hidden:
            return {"sequences_dir": str(sequences)}
        return {"hidden_dir": str(hidden) if self.undecided else None}

    def input_folders(self, input_dir: str) -> tuple[str | None, str | None]:
        """(hidden_dir, sequences_dir) of the CLI's one ``--input``."""
        return (input_dir, None) if self.reads_hidden else (None, input_dir)


def decide(mode: str, hidden_dir: str | Path | None = None, sizes: Sizes | None = None) -> TrainPlan:
    """The plan of ``train.mode`` given hidden/ (and, before extract, the sizes); see the module docstring."""
    if mode != AUTO:
        return TrainPlan(mode, f"train.mode is {mode}")
    if sizes is not None and not folder_is_complete(sizes.sequences_dir):
        return TrainPlan(AUTO, "sequences/ are not complete yet: nothing to weigh")
    if folder_is_complete(hidden_dir, written_by="extract"):
        return TrainPlan(HiddenShards.mode, f"hidden/ is complete at {hidden_dir}: offline", chosen=True)
    if sizes is None:
        return TrainPlan(Spooled.mode, f"no complete hidden/ at {hidden_dir}: online-vllm", chosen=True)
    fits, line = offline_fits(sizes, hidden_dir)
    if fits:
        return TrainPlan(HiddenShards.mode, f"{line}; they fit: offline", chosen=True)
    verdict = f"they do not fit (x{sizes.headroom} headroom): online-vllm, nothing stored"
    return TrainPlan(Spooled.mode, f"{line}; {verdict}", chosen=True)


def folder_is_complete(folder: str | Path | None, written_by: str | None = None) -> bool:
    from eagle3_core.run.manifest import read_manifest

    manifest = read_manifest(folder) if folder else None
    if manifest is None or manifest.status != "complete":
        return False
    return written_by is None or manifest.stage == written_by


def offline_fits(sizes: Sizes, hidden_dir: str | Path) -> tuple[bool, str]:
    """(whether hidden/ fits, the storage line saying why) for every token of sequences/."""
    from eagle3_core.contracts import sequences
    from eagle3_core.contracts.target import read_target_facts
    from eagle3_core.target.storage import storage_line

    tokens = sequences.token_total(sizes.sequences_dir)
    hidden_size = read_target_facts(sizes.target.require_path()).hidden_size
    line, need, free = storage_line(tokens, hidden_size, hidden_dir)
    return need * sizes.headroom <= free, line
