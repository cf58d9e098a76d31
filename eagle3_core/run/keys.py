"""One key for every stage's work: its name, its key version, its config parts, and its inputs by their bytes.

A stage is skipped when its manifest holds the same config hash and input fingerprints. Every stage
builds its config hash with ``stage_key`` (through ``Stage.key``), from its config parts: a config
part leaves out its ``speed_only`` fields (they change how fast the work runs, never its outputs, so
a rerun with another batch size or worker count resumes), and every part leaves out the fields that
only say where something lives (``LOCATIONS``: a path in a key made a moved model folder, a moved
prompts file or another vLLM environment redo extract and evaluate, hours for a large target, for
the same bytes). A file input is known by ``files_key`` (its bytes), a model folder by
``fingerprint.model_fingerprint``. A stage's ``key_version`` is bumped when it changes on purpose what
its outputs are: every folder it wrote is then redone once, and no branch keeps an older key alive.

``files_key`` hashes each file in full (a prompts file edited in its middle must not look
complete), once: the digest is kept in ``$EAGLE3_CACHE/fingerprints/files/`` under the file's
resolved path, size and mtime, so a rerun reads nothing and a moved file is hashed once again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from eagle3_core.base import StrictModel, stable_hash

# Config fields that say where something is, not what it is: its bytes are keyed as an input.
LOCATIONS = frozenset(
    {"path", "input", "python", "vllm_python", "log_dir", "cache_dir", "spool_dir", "deepspeed_config", "hostfile"}
)
CHUNK = 1 << 20


def stage_key(stage: str, version: int, **parts: Any) -> str:
    """The config hash of ``stage``'s work at key ``version``: ``parts`` are configs (``key_part``) or JSON-ready
    values, with the location fields left out at any depth."""
    dumped = {name: without_locations(key_part(value)) for name, value in parts.items()}
    return stable_hash({"stage": stage, "key_version": version, "parts": dumped})


def key_part(value: Any) -> Any:
    """A config as its key sees it: dumped without the fields it leaves out (``StrictModel.unkeyed``: its
    ``speed_only`` ones; a sub-model's are its parent's to list, as train lists ``online_vllm`` whole); any other
    value as it is."""
    if isinstance(value, StrictModel):
        return value.model_dump(mode="json", exclude=value.unkeyed())
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def without_locations(value: Any) -> Any:
    """``value`` with every mapping's location fields (``LOCATIONS``) left out."""
    if isinstance(value, dict):
        return {k: without_locations(v) for k, v in value.items() if k not in LOCATIONS}
    if isinstance(value, list):
        return [without_locations(v) for v in value]
    return value


def files_key(files: list[Path], root: Path) -> str:
    """The bytes of ``files``, named relative to ``root`` (a folder's layout is part of it; a file
    given alone is its bytes, whatever it is called): ``bytes:<hex>``."""
    digest = hashlib.blake2b(digest_size=16)
    for file in files:
        name = file.relative_to(root).as_posix() if file != root else ""
        digest.update(f"{name}\0{file.stat().st_size}\0".encode())
        digest.update(bytes.fromhex(file_digest(file)))
    return f"bytes:{digest.hexdigest()}"


def file_digest(file: Path) -> str:
    """The full blake2b of ``file``, read once per (path, size, mtime)."""
    from eagle3_core.run.fsio import write_json_atomic
    from eagle3_core.target.fingerprint import fingerprint_cache

    stat = file.stat()
    seen = stable_hash([str(file.resolve()), stat.st_size, stat.st_mtime_ns], 32)
    record = fingerprint_cache() / "files" / f"{seen}.json"
    if record.exists():
        return json.loads(record.read_text(encoding="utf-8"))["blake2b"]
    digest = hashlib.blake2b(digest_size=16)
    with open(file, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    write_json_atomic(record, {"blake2b": digest.hexdigest()})
    return digest.hexdigest()
