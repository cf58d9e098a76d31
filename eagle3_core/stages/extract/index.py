"""hidden/index.parquet: where each sample's tokens live.

One row per input sample, in shard order: ``sample_id`` (str), ``shard`` (file name),
``offset`` (first token row in the shard), ``length`` (tokens). Rebuilt from the plan and the
sequences files (cheap: two columns), so it is always consistent with the shards.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.contracts import sequences
from eagle3_core.run.fsio import atomic_path
from eagle3_core.stages.extract.plan import ShardSpec

INDEX_NAME = "index.parquet"


def write_index(sequences_dir: str | Path, out_dir: str | Path, shards: list[ShardSpec]) -> int:
    """Write the index atomically; returns the number of samples."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list] = {"sample_id": [], "shard": [], "offset": [], "length": []}
    cache: dict[str, tuple[list[str], list[int]]] = {}
    for shard in shards:
        if shard.part not in cache:
            cache.clear()  # shards of one file are contiguous: keep one file's columns
            cache[shard.part] = sequences.lengths(Path(sequences_dir) / shard.part)
        ids, lengths = cache[shard.part]
        offset = 0
        for i in shard.rows:
            columns["sample_id"].append(ids[i])
            columns["shard"].append(shard.name)
            columns["offset"].append(offset)
            columns["length"].append(lengths[i])
            offset += lengths[i]
    table = pa.table(
        {
            "sample_id": pa.array(columns["sample_id"], pa.string()),
            "shard": pa.array(columns["shard"], pa.string()),
            "offset": pa.array(columns["offset"], pa.int64()),
            "length": pa.array(columns["length"], pa.int64()),
        }
    )
    with atomic_path(Path(out_dir) / INDEX_NAME, record=True) as tmp:
        pq.write_table(table, tmp)
    return table.num_rows
