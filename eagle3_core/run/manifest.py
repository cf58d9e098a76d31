"""Every stage directory holds a ``manifest.json``: what went in, with which config, what came out.

A stage is skipped when its manifest says ``complete`` for the same config hash and the same
input fingerprints and its listed shards hold; otherwise it resumes from the shards it finished
(``eagle3_core.run.driver`` runs that rule for every stage). The manifest is written
atomically and ``complete`` is written last, so a crash can never leave a stage that claims
to be done but is not.

A manifest is read only whole and inside its folder: one that is not JSON, does not fit the
model, or lists a shard name that leads outside the stage folder (absolute, or with a ``..``
part; a hand-edited ``../../etc/hostname`` would have the stage stat that file and the user told
to delete it) is one ``InputError``, "damaged <stage> manifest", naming the file.
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import Field, ValidationError

from eagle3_core import __version__
from eagle3_core.base import StrictModel, stable_hash
from eagle3_core.errors import InputError
from eagle3_core.run.checksums import ShardRecord
from eagle3_core.run.fsio import read_json, write_json_atomic

MANIFEST_NAME = "manifest.json"


class StageManifest(StrictModel):
    """The on-disk record of one stage run."""

    stage: str = Field(description="Stage name: generate, reconstruct, vocab, extract, train, evaluate.")
    status: Literal["running", "complete", "failed"] = Field(
        description="`complete` only once every output is durable."
    )
    config_hash: str = Field(description="Hash of the stage config that produced the outputs.")
    inputs: dict[str, str] = Field(
        default_factory=dict, description="Input name -> fingerprint (an upstream manifest's fingerprint, or a path)."
    )
    counts: dict[str, int] = Field(
        default_factory=dict, description="Outcome counts (rows accepted, rejected, tokens, ...)."
    )
    timings: dict[str, float] = Field(default_factory=dict, description="Wall seconds per phase.")
    versions: dict[str, str] = Field(default_factory=dict, description="Versions of eagle3, Python and key libraries.")
    details: dict[str, Any] = Field(
        default_factory=dict, description="Stage-specific figures (reject reasons, match rate, coverage, ...)."
    )
    shards: dict[str, ShardRecord] = Field(
        default_factory=dict,
        description="Every output shard (path under the stage folder) with its size and blake2b, recorded when it was written.",
    )
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)

    def fingerprint(self) -> str:
        """What a downstream stage records as its input: changes whenever these outputs could."""
        return stable_hash(
            {"stage": self.stage, "config": self.config_hash, "inputs": self.inputs, "counts": self.counts}
        )

    def is_complete_for(self, config_hash: str, inputs: dict[str, str]) -> bool:
        return self.status == "complete" and self.config_hash == config_hash and self.inputs == inputs


def runtime_versions(*packages: str) -> dict[str, str]:
    """eagle3's and Python's versions plus those of ``packages`` that are installed."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"eagle3": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    for name in packages:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def manifest_path(stage_dir: str | Path) -> Path:
    return Path(stage_dir) / MANIFEST_NAME


def read_manifest(stage_dir: str | Path) -> StageManifest | None:
    """The stage's manifest, or None when the stage never ran there."""
    path = manifest_path(stage_dir)
    if not path.exists():
        return None
    raw = _raw(path)
    try:
        manifest = StageManifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise damaged_manifest(
            path, raw, f"{'.'.join(map(str, first['loc'])) or 'the manifest'}: {first['msg']}"
        ) from None
    for name in manifest.shards:
        if (problem := shard_name_problem(name)) is not None:
            raise damaged_manifest(path, raw, problem)
    return manifest


def shard_name_problem(name: str) -> str | None:
    """Why a listed shard name does not name a file inside the stage folder, or None: every
    reader and the driver's skip stat ``stage_dir / name``, and tell the user to delete it."""
    path = PurePosixPath(name)
    if path.is_absolute():
        return f"shard name {name!r} is absolute: a manifest lists names inside its own folder"
    if ".." in path.parts:
        return f"shard name {name!r} leads outside its folder ('..')"
    if not path.parts:
        return f"shard name {name!r} names the folder itself, not a shard"
    return None


def damaged_manifest(path: Path, raw: Any, why: str) -> InputError:
    """The one error for a manifest that cannot be trusted; it names the stage that wrote it."""
    stage = raw.get("stage") if isinstance(raw, dict) and isinstance(raw.get("stage"), str) else path.parent.name
    return InputError(
        f"damaged {stage} manifest {path}: {why}",
        path=str(path),
        fix=f"delete it and rerun `eagle3 {stage}`: the stage writes it again",
    )


def _raw(path: Path) -> Any:
    try:
        return read_json(path)
    except (ValueError, UnicodeDecodeError) as exc:  # json.JSONDecodeError is a ValueError
        raise damaged_manifest(path, None, f"not JSON ({exc})") from None


def write_manifest(stage_dir: str | Path, manifest: StageManifest) -> None:
    manifest.updated_at = time.time()
    write_json_atomic(manifest_path(stage_dir), manifest.model_dump(mode="json"))


def input_fingerprint(stage_dir: str | Path) -> str:
    """The fingerprint of a finished upstream stage, or of a plain path when it has no manifest."""
    manifest = read_manifest(stage_dir)
    if manifest is None:
        return f"path:{Path(stage_dir).resolve()}"
    return manifest.fingerprint()
