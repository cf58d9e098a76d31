"""Wall time and peak memory of each stage of `eagle3 demo`, on this machine.

    flock /tmp/eagle3-vllm.lock .venv/bin/python benchmarks/bench_demo.py [--out DIR] [--fresh-toy]

Runs the pipeline flow on configs/toy.yaml exactly as `eagle3 demo` does (ephemeral Prefect API
unless PREFECT_API_URL is set) while a sampler thread reads the resident memory of this process
and all its children (the vLLM server, DeepSpeed workers) every 0.2 s. A stage's peak is the
highest total seen while it ran. ``--fresh-toy`` builds the toy target in an empty cache, so its
training is timed too; ``--out`` defaults to a fresh temporary directory (a run with nothing to
reuse). Prints a markdown table for benchmarks/demo.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


class TreeMemory:
    """Samples the summed RSS of this process and its descendants in a background thread."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval, self.samples = interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    continue
            self.samples.append((time.time(), total))
            self._stop.wait(self.interval)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float, end: float) -> int:
        return max((rss for t, rss in self.samples if start <= t <= end), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="Run directory (default: a fresh temporary one).")
    parser.add_argument("--fresh-toy", action="store_true", help="Build the toy target in an empty cache.")
    args = parser.parse_args()
    if args.fresh_toy:
        os.environ["EAGLE3_CACHE"] = tempfile.mkdtemp(prefix="eagle3-cache-")
    out = args.out or tempfile.mkdtemp(prefix="eagle3-bench-demo-")

    from flows.cli.demo import OFFLINE

    for key, value in OFFLINE.items():  # the demo's environment: no hub, no telemetry
        os.environ.setdefault(key, value)
    from eagle3_core.config import PipelineConfig
    from flows.pipeline import pipeline

    config = PipelineConfig.from_yaml(ROOT / "configs" / "toy.yaml").model_copy(update={"out": out})
    with TreeMemory() as memory:
        started = time.time()
        outcomes = pipeline(config)
        total = time.time() - started
    print(f"\nrun directory: {out}\n")
    print("| stage | outcome | wall s | peak RSS (process tree) GiB |")
    print("|---|---|---:|---:|")
    for name, o in outcomes.items():
        peak = memory.peak(o["started"], o["started"] + o["seconds"]) if o["seconds"] else 0
        print(f"| {name} | {o['status']} | {o['seconds']:.1f} | {peak / 2**30:.2f} |")
    print(f"| **whole demo** (flow incl. Prefect start-up) | | {total:.1f} | {memory.peak(0, 2e9) / 2**30:.2f} |")


if __name__ == "__main__":
    main()
