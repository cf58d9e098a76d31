"""How long vLLM took to start on this machine: times said are times measured.

A start said to take "about 30 s on CPU" took 52 s and 111 s on a loaded machine. Each healthy
start records its seconds per device (cpu, cuda) in ``$EAGLE3_CACHE/vllm_starts.json``;
``estimate`` says the last one, or that none is known yet. Best effort: a cache that cannot be
read or written costs the estimate, never the start.
"""

from __future__ import annotations

import json
from pathlib import Path

FILE = "vllm_starts.json"


def starts_file() -> Path:
    from eagle3_core.run.fsio import cache_root

    return cache_root() / FILE


def record(device: str, seconds: float) -> None:
    """Keep ``seconds`` as the last start's on ``device``."""
    from eagle3_core.run.fsio import write_json_atomic

    try:
        write_json_atomic(starts_file(), {**_read(), device: round(seconds, 1)})
    except OSError:
        pass


def estimate(device: str) -> str:
    """`the last start here took 52 s`, or `no start measured on this machine yet`."""
    seconds = _read().get(device)
    if not isinstance(seconds, int | float):
        return f"no vLLM start measured on this machine's {device} yet"
    return f"the last start on this machine's {device} took {seconds:.0f} s"


def _read() -> dict:
    try:
        found = json.loads(starts_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
