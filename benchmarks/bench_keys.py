"""Memory of the generate stage's sample keys at a million prompts (issue 13, item 6).

Measures with tracemalloc, one structure at a time: the seen-keys set as it was (a Python
``set[int]``), the resume dict as it was (``{sample_id: outcome}`` from the shards, then
``{int: outcome}``), and their replacements in ``eagle3_core/stages/generate/keys.py``
(``KeySet``, ``PersistedKeys``), plus the time to add and to look up every key.

    .venv/bin/python benchmarks/bench_keys.py [--keys 1000000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eagle3_core.base import stable_hash  # noqa: E402
from eagle3_core.stages.generate.keys import KeySet, PersistedKeys, key64  # noqa: E402


def traced(build):
    tracemalloc.start()
    start = time.perf_counter()
    value = build()
    seconds = time.perf_counter() - start
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return value, {"mb": round(current / 1e6, 1), "peak_mb": round(peak / 1e6, 1), "build_s": round(seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    n = parser.parse_args().keys
    ids = [stable_hash({"i": i}, length=24) for i in range(n)]  # sample ids as the stage makes them
    report = {"keys": n}

    def python_set():
        seen = set()
        for s in ids:
            seen.add(int(s[:16], 16))
        return seen

    def keyset():
        seen = KeySet()
        for s in ids:
            seen.add(key64(s))
        return seen

    _, report["seen_python_set_int"] = traced(python_set)
    compact, report["seen_keyset"] = traced(keyset)
    start = time.perf_counter()
    assert all(key64(s) in compact for s in ids[: n // 10])
    report["keyset_lookup_us"] = round(1e6 * (time.perf_counter() - start) / (n // 10), 2)
    _, report["resume_dict_str"] = traced(lambda: {s: "accepted" for s in ids})
    _, report["resume_dict_int"] = traced(lambda: {int(s[:16], 16): "accepted" for s in ids})
    _, report["resume_persisted_keys"] = traced(
        lambda: PersistedKeys(np.empty(0, np.int64), np.fromiter((key64(s) for s in ids), np.int64, count=n))
    )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
