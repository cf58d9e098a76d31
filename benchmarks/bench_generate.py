"""Throughput of the generate stage against a server of known capacity.

A loopback server (tests/fixtures/fake_server.py, in its own process so its CPU is not counted)
answers every chat request after a fixed delay. At concurrency C and delay D its capacity is
C / D requests/s (128 at the defaults). The script runs, against the same server in the same
process:
1. a bare AsyncOpenAI loop (C in flight, no parsing, no persistence): the client's ceiling;
2. ``run_generate`` (probe, retries armed, parsing, Parquet shards, manifest).
It prints requests/s, the share of capacity, client CPU per request and stage/bare ratio.

    .venv/bin/python benchmarks/bench_generate.py [--requests 5120] [--concurrency 128] [--delay 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(delay: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.fixtures.fake_server", "--port", str(port),
                             "--delay", str(delay)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    return proc, url


async def bare_loop(url: str, n: int, concurrency: int) -> None:
    import httpx
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0,
                         http_client=DefaultAsyncHttpxClient(limits=limits))
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": f"bare {i}"}],
                                                 max_tokens=64, extra_body={"return_token_ids": True})

    await asyncio.gather(*(one(i) for i in range(n)))
    await client.close()


def measure(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5120)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--delay", type=float, default=1.0)
    args = parser.parse_args()

    from eagle3_core.generate.config import GenerateConfig, PromptSource
    from eagle3_core.generate.stage import run_generate

    capacity = args.concurrency / args.delay
    server, url = start_server(args.delay)
    try:
        bare_wall, bare_cpu = measure(lambda: asyncio.run(bare_loop(url, args.requests, args.concurrency)))
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "prompts.jsonl"
            src.write_text("".join(json.dumps({"prompt": f"stage {i}"}) + "\n" for i in range(args.requests)))
            cfg = GenerateConfig(prompts=PromptSource(input=str(src)), base_urls=[url],
                                 concurrency=args.concurrency, max_tokens=64)
            manifest = None

            def stage() -> None:
                nonlocal manifest
                manifest = run_generate(cfg, Path(tmp) / "out")

            stage_wall, stage_cpu = measure(stage)
    finally:
        server.terminate()
        server.wait()

    assert manifest.counts["accepted"] == args.requests, manifest.counts
    sustained = args.requests / manifest.timings["generate"]
    bare_rate, stage_rate = args.requests / bare_wall, args.requests / stage_wall
    report = {
        "requests": args.requests, "concurrency": args.concurrency, "delay_s": args.delay,
        "capacity_req_s": capacity, "cpu_count": os.cpu_count(),
        "bare_req_s": round(bare_rate, 2), "bare_share_of_capacity": round(bare_rate / capacity, 4),
        "bare_cpu_ms_per_req": round(1000 * bare_cpu / args.requests, 3),
        "stage_req_s_overall": round(stage_rate, 2), "stage_req_s_sustained": round(sustained, 2),
        "stage_share_of_capacity_sustained": round(sustained / capacity, 4),
        "stage_share_of_capacity_overall": round(stage_rate / capacity, 4),
        "stage_cpu_ms_per_req": round(1000 * stage_cpu / args.requests, 3),
        "stage_over_bare_sustained": round(sustained / bare_rate, 4),
        "stage_over_bare_overall": round(stage_rate / bare_rate, 4),
        "stage_probe_s": manifest.timings["probe"], "stage_generate_s": manifest.timings["generate"],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
