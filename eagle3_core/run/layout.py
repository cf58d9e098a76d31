"""The run directory: one folder per stage, the only channel between stages.

```
run/generations/accepted/*.parquet   run/generations/rejected/*.parquet   run/generations/manifest.json
run/sequences/*.parquet              run/vocab/                             run/hidden/
run/drafter/checkpoints/             run/drafter/export/                    run/eval/report.json
```
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class RunLayout(BaseModel):
    """Paths of every stage folder under one run directory."""

    model_config = ConfigDict(frozen=True)
    root: Path

    @property
    def generations(self) -> Path:
        return self.root / "generations"

    @property
    def sequences(self) -> Path:
        return self.root / "sequences"

    @property
    def vocab(self) -> Path:
        return self.root / "vocab"

    @property
    def hidden(self) -> Path:
        return self.root / "hidden"

    @property
    def drafter(self) -> Path:
        return self.root / "drafter"

    @property
    def export(self) -> Path:
        return self.drafter / "export"

    @property
    def eval(self) -> Path:
        return self.root / "eval"
