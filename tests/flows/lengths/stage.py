"""sequences/ -> lengths/: one ``part-NNNNN.json`` of token counts per sequences part (one unit each)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

from eagle3_core.contracts import sequences
from eagle3_core.contracts.details import StageDetails
from eagle3_core.run.driver import Stage
from eagle3_core.run.fsio import atomic_path
from eagle3_core.run.manifest import StageManifest, input_fingerprint
from eagle3_core.run.progress import Reporter
from eagle3_core.run.rejects import Rejects
from eagle3_core.stages.lengths.config import LengthsConfig


class LengthsDetails(StageDetails):
    """lengths/: the label its counts were written under."""

    stage: ClassVar[str] = "lengths"

    label: str


@dataclass
class LengthsStage(Stage):
    """Count the tokens of every sequence; reject the short ones."""

    name, shards = "lengths", ("part-*.json",)

    cfg: LengthsConfig
    sequences_dir: str
    out_dir: str
    reporter: Reporter | None = None

    def keys(self) -> tuple[str, dict[str, str]]:
        self.parts = sequences.parts(self.sequences_dir)
        return self.key(lengths=self.cfg), {"sequences": input_fingerprint(self.sequences_dir)}

    def plan(self) -> list[int]:
        return list(range(len(self.parts)))

    def run(self, index: int) -> Rejects:
        counts = sequences.read(self.parts[index], ["num_tokens"]).column(0).to_pylist()
        kept = [n for n in counts if n >= self.cfg.min_tokens]
        with atomic_path(self.out_dir / f"part-{index:05d}.json", record=True) as tmp:
            tmp.write_text(json.dumps({"label": self.cfg.label, "num_tokens": kept}))
        return Rejects({"short": len(counts) - len(kept)})

    def finish(self, manifest: StageManifest) -> None:
        kept = [json.loads(p.read_text())["num_tokens"] for p in sorted(self.out_dir.glob("part-*.json"))]
        manifest.counts = {"sequences": sum(len(k) for k in kept), "tokens": sum(sum(k) for k in kept)}
        manifest.details = LengthsDetails(label=self.cfg.label).dump()
