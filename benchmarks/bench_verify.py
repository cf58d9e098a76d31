"""What checking hidden/ costs before training: sizes and headers (every run) vs full checksums.

Writes ``--shards`` shards of ``--tokens`` tokens each at width ``--hidden`` in the extract
stage's format (eagle3_core.states.writer, random bf16 states), their index and a complete
manifest listing them (as extract's lifecycle does), then times ``contracts.hidden.verify`` with
and without checksums, and the blake2b rate it implies.

    .venv/bin/python benchmarks/bench_verify.py --shards 4 --tokens 16384 --hidden 1024
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def build(root: Path, shards: int, tokens: int, hidden: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from eagle3_core.run.checksums import shard_records
    from eagle3_core.run.manifest import StageManifest, write_manifest
    from eagle3_core.states.writer import ShardWriter

    index = {"sample_id": [], "shard": [], "offset": [], "length": []}
    for s in range(shards):
        name = f"shard-{s:05d}.safetensors"
        writer = ShardWriter(root / name, tokens, hidden, {"shard_key": str(s)})
        writer.write(
            0,
            torch.randn(tokens, 3, hidden),
            torch.randn(tokens, hidden),
            torch.zeros(tokens, dtype=torch.int32),
            torch.ones(tokens, dtype=torch.uint8),
        )
        writer.close()
        index["sample_id"].append(f"s{s}"), index["shard"].append(name)
        index["offset"].append(0), index["length"].append(tokens)
    pq.write_table(pa.table(index), root / "index.parquet")
    files = sorted(root.glob("shard-*.safetensors")) + [root / "index.parquet"]
    write_manifest(
        root, StageManifest(stage="extract", status="complete", config_hash="bench", shards=shard_records(root, files))
    )
    return sum(f.stat().st_size for f in files)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=1024)
    args = parser.parse_args()
    from eagle3_core.contracts import hidden

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        size = build(root, args.shards, args.tokens, args.hidden)
        sizes = min(timed(lambda: hidden.verify(root)) for _ in range(3))
        sums = min(timed(lambda: hidden.verify(root, checksums=True)) for _ in range(2))
    mib = size / 2**20
    print(f"hidden/: {args.shards} shards, {mib:,.0f} MiB")
    print(f"sizes + headers: {sizes * 1000:.1f} ms")
    print(f"full blake2b:    {sums:.2f} s ({mib / sums:,.0f} MiB/s)")


if __name__ == "__main__":
    main()
