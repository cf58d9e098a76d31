"""One hidden/ shard: load its rows, run the engine batch by batch, write, refuse NaN/Inf.

The shard is written to ``shard-NNNNN.safetensors.tmp`` and renamed into place only once
every sample is written and checked, so a killed run leaves no shard that looks finished.
Checking and writing a batch runs on a writer thread while the engine computes the next one
(at H = 4096 a GPU makes ~0.8 GB/s of states, so serial writes would idle it); at most two
batches wait, so host memory stays at a few batches.
The shard's figures (tokens, computed tokens with padding, engine) go into its own header,
so the stage summary is right even for shards finished by an earlier, killed run.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eagle3_core.contracts import hidden
from eagle3_core.contracts.hidden import FORMAT, finished_key, read_metadata
from eagle3_core.run.fsio import atomic_path
from eagle3_core.stages.extract.plan import ShardSpec, load_shard_rows
from eagle3_core.states.writer import ShardWriter, refuse_non_finite


def shard_is_done(out_dir: str | Path, shard: ShardSpec) -> bool:
    """Its key matches and it is whole (a truncated shard with an intact header is redone)."""
    path = Path(out_dir) / shard.name
    return finished_key(path) == shard.key and hidden.is_whole(path)


def shard_figures(out_dir: str | Path, shard: ShardSpec) -> dict[str, int]:
    """tokens / computed_tokens / supervised_tokens of a finished shard, from its header."""
    meta = read_metadata(Path(out_dir) / shard.name) or {}
    return {k: int(float(meta.get(k, 0))) for k in ("tokens", "computed_tokens", "supervised_tokens")}


def write_shard(
    engine, sequences_dir: str | Path, out_dir: str | Path, shard: ShardSpec, hidden_size: int, layers: list[int]
) -> dict[str, Any]:
    """Compute and write one shard; returns its figures."""
    import torch

    started = time.perf_counter()
    rows = load_shard_rows(sequences_dir, shard)
    offsets = _cumsum([len(ids) for _, ids, _ in rows])
    batches = engine.plan([len(ids) for _, ids, _ in rows])
    figures = {
        "tokens": shard.tokens,
        "computed_tokens": sum(b.padded_tokens for b in batches),
        "supervised_tokens": sum(int(sum(mask)) for _, _, mask in rows),
    }
    meta = {
        "shard_key": shard.key,
        **{k: str(v) for k, v in figures.items()},
        "engine": engine.name,
        "layers": ",".join(map(str, layers)),
        "format": FORMAT,
    }

    def store(members: tuple[int, ...], states: list) -> None:
        for i, (aux, final) in zip(members, states):
            sample_id, ids, mask = rows[i]
            refuse_non_finite(aux, final, sample_id, Path(out_dir) / shard.name)
            writer.write(
                offsets[i], aux, final, torch.tensor(ids, dtype=torch.int32), torch.tensor(mask, dtype=torch.uint8)
            )

    with atomic_path(Path(out_dir) / shard.name, record=True) as tmp:
        writer = ShardWriter(tmp, shard.tokens, hidden_size, meta)
        try:
            _pipeline(engine, batches, rows, store)
        finally:
            writer.close()
    return {**figures, "seconds": time.perf_counter() - started}


def _pipeline(engine, batches: list, rows: list, store) -> None:
    """Forward batch n + 1 while a writer thread checks and stores batch n (two may wait)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="eagle3-shard-writer") as pool:
        pending: deque[Future] = deque()
        for batch in batches:
            states = engine.forward([rows[i][1] for i in batch.members])
            pending.append(pool.submit(store, batch.members, states))
            while len(pending) > 2 or (pending and pending[0].done()):
                pending.popleft().result()  # re-raises a NaN refusal or a write error
        while pending:
            pending.popleft().result()


def _cumsum(lengths: list[int]) -> list[int]:
    offsets, total = [], 0
    for n in lengths:
        offsets.append(total)
        total += n
    return offsets
