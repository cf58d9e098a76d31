"""A stage of the one shape around a plain function, for the lifecycle tests: ``work(manifest)``
runs as its one unit's work, with the manifest the driver completes (it may return ``Rejects``)."""

from __future__ import annotations

from pathlib import Path

from eagle3_core.run.driver import Stage, drive
from eagle3_core.run.progress import NullReporter


class WorkStage(Stage):
    name = "demo"

    def __init__(self, out: Path, work, shards=(), inputs=None, changed_outputs=None) -> None:
        self.out_dir, self.reporter, self.work = Path(out), NullReporter(), work
        self.shards, self.outputs, self.inputs = tuple(shards), changed_outputs, inputs or {}
        self.config_hash = "cfg"

    def keys(self):
        return self.config_hash, self.inputs

    def run(self, unit) -> None:
        return None

    def finish(self, manifest):
        return self.work(manifest)


def run_work(out: Path, work, shards=(), inputs=None, verify: bool | None = None):
    return drive(WorkStage(out, work, shards, inputs), verify=verify)
