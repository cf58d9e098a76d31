"""What every reader does first: name a damaged shard the same way, and hold the folder to what
its manifest lists.

A folder whose manifest is ``complete`` lists each shard it wrote with its size and blake2b
(``eagle3_core.run.checksums``). ``check_listed`` holds the files to that list before anything is
read: a listed shard that is gone or has another size is named (sizes cost one ``stat`` each);
with ``verify`` (or ``EAGLE3_VERIFY=1``) every checksum too. A folder still ``running``, or one
written before manifests listed shards, is read as it is.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.errors import InputError


def redo_fix(stage: str) -> str:
    return f"delete it and rerun `eagle3 {stage}`: the stage redoes that shard"


def required(path: str | Path, what: str, fix: str) -> Path:
    """``path``, or an ``InputError`` "no <what> at <path>" with ``fix`` when it is not a file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no {what} at {path}", path=str(path), fix=fix)
    return path


def damaged(path: str | Path, why: str, stage: str) -> InputError:
    """The error for a shard that is missing or cannot be read."""
    return InputError(f"damaged {stage} shard {Path(path).name}: {why}", path=str(path), fix=redo_fix(stage))


PARTS = "part-*.parquet"


def listed_parts(stage_dir: str | Path, stage: str, found_what: str, under: str = "") -> list[Path]:
    """Every ``part-*.parquet`` of the folder (in ``under``), in name order, after the folder is held
    to its manifest (a listed part gone or cut short is named); when there are none, an error saying
    what to run: "no <found_what> (<pattern>) in <folder>"."""
    check_listed(stage_dir, stage)
    folder = Path(stage_dir) / under
    found = sorted(folder.glob(PARTS)) if folder.is_dir() else []
    if not found:
        raise InputError(
            f"no {found_what} ({Path(under) / PARTS if under else PARTS}) in {stage_dir}",
            path=str(folder),
            fix=f"run `eagle3 {stage} --out DIR` first and pass that DIR as --input",
        )
    return found


def check_listed(stage_dir: str | Path, stage: str, verify: bool | None = None) -> None:
    """Every shard the folder's complete manifest lists is there with its size (and checksum)."""
    from eagle3_core.run.checksums import shard_problem, verify_requested
    from eagle3_core.run.manifest import read_manifest

    manifest = read_manifest(stage_dir)
    if manifest is None or manifest.status != "complete":
        return
    verify = verify_requested() if verify is None else verify
    for name, record in manifest.shards.items():
        problem = shard_problem(Path(stage_dir) / name, record, verify)
        if problem:
            raise damaged(Path(stage_dir) / name, problem, stage)
