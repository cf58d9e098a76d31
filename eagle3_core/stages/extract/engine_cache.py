"""Which engine computes the states, and one loaded engine per process.

An engine has ``name``, ``plan(lengths) -> batches`` and ``forward(batch_ids) -> [(aux [T,3,H],
final [T,H])]`` (bf16, CPU) and ``close()``. Loading a target takes minutes at scale, so an
engine is built once per process and reused by every shard (the Prefect flow runs one task
per shard in the same process); ``release_engines`` frees them at the end of a run.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

_ENGINES: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def get_engine(cfg, target, layers: list[int], num_hidden_layers: int, longest: int, workdir: Path):
    """The cached engine for (config, target, layers, longest sample), built on first use; a vLLM
    engine works (and logs) in ``workdir``."""
    key = (cfg.content_hash(), target.content_hash(), tuple(layers), longest)
    with _LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = _build(cfg, target, layers, num_hidden_layers, longest, workdir)
        return _ENGINES[key]


def _build(cfg, target, layers: list[int], num_hidden_layers: int, longest: int, workdir: Path):
    from eagle3_core.states.engines.build import build_engine

    return build_engine(
        cfg.engine, target, layers, num_hidden_layers, longest, workdir,
        vllm=cfg.vllm_options(), device=cfg.device, max_tokens_per_batch=cfg.max_tokens_per_batch,
    )  # fmt: skip


def release_engines() -> None:
    """Close every cached engine (frees GPU memory, stops vLLM workers)."""
    with _LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        engine.close()
