"""Dated versions of a generated dataset, for the nightly regeneration.

On-disk layout under one dataset root::

    root/versions/2026-11-30/generations/{accepted,rejected}/part-*.parquet  (+ manifest.json)
    root/versions/2026-11-30/version.json        written last: the version is complete
    root/versions/2026-11-30/{sequences,vocab,hidden}/   when the nightly continues into training
    root/drafters/2026-11-30/                    a drafter trained on that version
    root/drafters/2026-11-30/trained_on.json     {"version": "2026-11-30"}

Guarantees:
- A new version starts from the previous one's shards: a shard whose every row belongs to the
  current prompts under the current model and sampling config is reused as a hard link (no
  copy, no request); a shard with some such rows is rewritten with only those rows; the rest is
  left behind. The generate stage then resumes in the new version and requests only what no
  shard holds (its resume reads the sample ids of the shards on disk).
- ``prune`` keeps the newest ``keep`` complete versions and every version a drafter under
  ``root/drafters`` was trained on; it never deletes an incomplete version (a run in progress).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from eagle3_core.contracts import generations
from eagle3_core.run.fsio import atomic_path, read_json, write_json_atomic
from eagle3_core.stages.generate.config import GenerateConfig

VERSION_FILE = "version.json"
TRAINED_ON_FILE = "trained_on.json"
KINDS = (generations.ACCEPTED, generations.REJECTED)


@dataclass(frozen=True)
class Reuse:
    """What a new version took over from the previous one."""

    linked: int = 0  # shards reused unchanged (hard links)
    filtered: int = 0  # shards rewritten with only the rows still current
    dropped: int = 0  # shards with no current row
    rows: int = 0  # rows carried over


def versions_dir(root: str | Path) -> Path:
    return Path(root) / "versions"


def drafters_dir(root: str | Path) -> Path:
    return Path(root) / "drafters"


def complete_versions(root: str | Path) -> list[str]:
    """Names of complete versions, oldest first (names sort by date)."""
    base = versions_dir(root)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / VERSION_FILE).exists())


def new_version_name(root: str | Path, today: dt.date) -> str:
    """``YYYY-MM-DD``, or ``YYYY-MM-DD.N`` when that day already has a complete version.

    An incomplete version of the same name (a crashed run) is resumed, not replaced.
    """
    base, name, n = versions_dir(root), today.isoformat(), 1
    while (base / name / VERSION_FILE).exists():
        n += 1
        name = f"{today.isoformat()}.{n:02d}"
    return name


def seed_from(previous: Path, target: Path, current_ids: set[str]) -> Reuse:
    """Carry ``previous``'s generation shards whose rows are current into ``target``."""
    import polars as pl

    linked = filtered = dropped = rows = 0
    for kind in KINDS:
        out = target / kind
        out.mkdir(parents=True, exist_ok=True)
        if any(out.glob("part-*.parquet")):
            continue  # resuming a version that was already seeded
        index = 0
        for shard in sorted((previous / kind).glob("part-*.parquet")):
            ids = pl.read_parquet(shard, columns=["sample_id"])["sample_id"]
            keep = ids.is_in(list(current_ids)) & ids.is_not_null()
            dest = out / f"part-{index:05d}.parquet"
            if keep.all():
                _link_or_copy(shard, dest)
                linked += 1
            elif keep.any():
                frame = pl.read_parquet(shard).filter(keep)
                with atomic_path(dest) as tmp:
                    frame.write_parquet(tmp, compression="zstd")
                filtered += 1
            else:
                dropped += 1
                continue
            rows, index = rows + int(keep.sum()), index + 1
    return Reuse(linked, filtered, dropped, rows)


def _link_or_copy(src: Path, dest: Path) -> None:
    """A hard link costs no space; across file systems fall back to a copy."""
    try:
        os.link(src, dest)
    except OSError:
        with atomic_path(dest) as tmp:
            shutil.copyfile(src, tmp)


def mark_complete(version_dir: Path, record: dict) -> None:
    write_json_atomic(version_dir / VERSION_FILE, record)


def read_version(version_dir: Path) -> dict:
    return read_json(version_dir / VERSION_FILE)


def mark_trained_on(drafter_dir: Path, version: str) -> None:
    write_json_atomic(drafter_dir / TRAINED_ON_FILE, {"version": version})


def trained_on(root: str | Path) -> dict[str, str]:
    """Drafter name -> the version it was trained on, for every drafter under ``root/drafters``."""
    base = drafters_dir(root)
    if not base.is_dir():
        return {}
    return {p.parent.name: read_json(p)["version"] for p in sorted(base.glob(f"*/{TRAINED_ON_FILE}"))}


def latest_drafter(root: str | Path) -> Path | None:
    """The newest drafter directory with a trained_on record (the one training continues from)."""
    names = sorted(trained_on(root))
    return drafters_dir(root) / names[-1] if names else None


def prune(root: str | Path, keep: int) -> list[str]:
    """Delete complete versions beyond the newest ``keep``, except those a drafter was trained on.

    Returns the names deleted.
    """
    versions = complete_versions(root)
    protected = set(versions[-keep:] if keep > 0 else []) | set(trained_on(root).values())
    deleted = [name for name in versions if name not in protected]
    for name in deleted:
        shutil.rmtree(versions_dir(root) / name)
    return deleted


def current_sample_ids(cfg: GenerateConfig) -> set[str]:
    """The sample id of every prompt under ``cfg``'s model and sampling config, as the served source
    keys them (``generations.sample_key``: tools included, so a row with tools is carried over like
    any other)."""
    from eagle3_core.chat.rows import RowRejection, normalize_prompt
    from eagle3_core.prompts.inputs import iter_rows

    key, ids = cfg.sampling_key(), set()
    for row in iter_rows(cfg.prompts):
        prompt = normalize_prompt(row)
        if not isinstance(prompt, RowRejection):
            messages, tools = prompt
            ids.add(generations.sample_key(messages, key, tools))
    return ids
