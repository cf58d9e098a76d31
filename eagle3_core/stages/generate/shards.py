"""Accepted and rejected rows into Parquet shards, atomically; what is already on disk, for resume.

On-disk layout (docs/stages/generate.md, generations/): ``<out>/accepted/part-NNNNN.parquet`` and
``<out>/rejected/part-NNNNN.parquet`` (and ``<out>/turns/part-NNNNN.parquet``, the earlier turns of
``generate.turns: all``, ``turns.py``), each of the columns ``contracts.generations`` declares. A
shard is written to a temp name unique to its process and renamed into place (``fsio.atomic_path``),
so a SIGKILL leaves finished shards plus at most one stray ``.tmp`` (deleted at the next start); a
row is durable exactly when its shard is. Rows are buffered and flushed every ``shard_rows`` rows or
``flush_seconds``, whichever comes first: a killed run loses at most that much work, and loses it
cleanly (it is requested again). A failed write (a full disk) raises ``StageError`` and leaves no
partial shard behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eagle3_core.contracts import generations
from eagle3_core.contracts.folder import damaged
from eagle3_core.contracts.generations import ACCEPTED, REJECTED
from eagle3_core.endpoint.health import is_open
from eagle3_core.errors import StageError
from eagle3_core.run.fsio import atomic_path, stray_temps
from eagle3_core.stages.generate.keys import PersistedKeys, key64, key_array


def shard_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("part-*.parquet")) if directory.is_dir() else []


class RowShardWriter:
    """Buffers rows of one kind (accepted, rejected, turns) and writes them as numbered Parquet shards."""

    def __init__(self, directory: Path, kind: str, shard_rows: int, flush_seconds: float) -> None:
        self.directory, self.kind = directory, kind  # kind: a key of generations.COLUMNS
        self.shard_rows, self.flush_seconds = shard_rows, flush_seconds
        self.rows: list[dict[str, Any]] = []
        self.written = 0
        self._last_flush = time.monotonic()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for stray in stray_temps(directory):
                stray.unlink()
        except OSError as exc:
            raise StageError(
                f"cannot prepare the output directory: {exc.strerror or exc}",
                path=str(directory),
                fix="choose a writable --out",
            ) from None
        existing = shard_files(directory)
        self._next = int(existing[-1].stem.split("-")[1]) + 1 if existing else 0

    def add(self, row: dict[str, Any]) -> bool:
        """Buffer one row; True when the buffer holds a full shard."""
        self.rows.append(row)
        return len(self.rows) >= self.shard_rows

    def due(self) -> bool:
        return bool(self.rows) and time.monotonic() - self._last_flush >= self.flush_seconds

    def take(self) -> tuple[Path, list[dict[str, Any]]] | None:
        """The buffered rows and the shard path they go to; the buffer starts empty again.
        Writing them (``write``) may then happen off the event loop."""
        self._last_flush = time.monotonic()
        if not self.rows:
            return None
        rows, self.rows = self.rows, []
        path = self.directory / f"part-{self._next:05d}.parquet"
        self._next += 1
        return path, rows

    def write(self, path: Path, rows: list[dict[str, Any]]) -> None:
        """Write one shard atomically; a failure (a full disk) is a ``StageError``, no partial file."""
        import polars as pl

        try:
            frame = generations.frame(self.kind, rows)
            with atomic_path(path, record=True) as tmp:
                frame.write_parquet(tmp, compression="zstd", statistics=False)
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise StageError(
                f"cannot write shard {path.name}: {getattr(exc, 'strerror', None) or exc}",
                path=str(path),
                fix="free disk space or choose another --out; finished shards are intact and a rerun resumes from them",
            ) from None
        self.written += len(rows)

    def flush(self) -> None:
        taken = self.take()
        if taken is not None:
            self.write(*taken)


def drop_stale(files: list[Path], current: Callable[[int], bool], bad_rows: set[int]) -> int:
    """Keep in ``files`` (shards an earlier run left) only the rows of this run: a keyed row whose
    ``key64`` is ``current``, an unkeyed reject whose row index is in ``bad_rows``, and no server
    failure (this run sent its prompt again and wrote the new outcome). A shard losing rows is
    rewritten atomically (recorded), one losing all is deleted. Returns the rows dropped."""
    import polars as pl

    dropped = 0
    for file in files:
        frame = pl.read_parquet(file)
        keys = frame["sample_id"].to_list()
        indices = frame["row_index"].to_list() if "row_index" in frame.columns else [None] * len(keys)
        resent = [is_open(r) for r in frame["reason"]] if "reason" in frame.columns else [False] * len(keys)
        keep = [
            not again and (current(key64(k)) if k is not None else i in bad_rows)
            for k, i, again in zip(keys, indices, resent)
        ]
        if all(keep):
            continue
        dropped += keep.count(False)
        if not any(keep):
            file.unlink()
            continue
        with atomic_path(file, record=True) as tmp:
            frame.filter(pl.Series(keep)).write_parquet(tmp, compression="zstd", statistics=False)
    return dropped


def read_persisted(out_dir: Path) -> tuple[PersistedKeys, set[int], int]:
    """The key and outcome of every durable row (``keys.py``: 9 bytes a row), the row indices of
    rejected rows that have no sample_id (malformed input), and how many rejects were server
    failures (``endpoint.health.is_open``): those are left out, so this run sends them again."""
    import numpy as np
    import polars as pl

    keys: dict[str, list] = {REJECTED: [], ACCEPTED: []}
    unkeyed: set[int] = set()
    resend = 0
    for kind in (REJECTED, ACCEPTED):
        for file in shard_files(out_dir / kind):
            columns = ["sample_id", "row_index", "reason"] if kind == REJECTED else ["sample_id"]
            try:
                frame = pl.read_parquet(file, columns=columns)
            except Exception as exc:  # a shard is atomic, so this is outside damage: say which file
                raise damaged(
                    file, f"not a readable Parquet file ({str(exc).splitlines()[0][:160]})", "generate"
                ) from None
            if kind == REJECTED:
                unkeyed.update(frame.filter(pl.col("sample_id").is_null())["row_index"].to_list())
                failed = pl.Series([is_open(r) for r in frame["reason"]], dtype=pl.Boolean)
                resend += int(failed.sum())
                frame = frame.filter(~failed)
            keys[kind].append(key_array(frame["sample_id"]))
    join = lambda arrays: np.concatenate(arrays) if arrays else np.empty(0, np.int64)  # noqa: E731
    return PersistedKeys(join(keys[REJECTED]), join(keys[ACCEPTED])), unkeyed, resend
