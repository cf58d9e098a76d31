"""Throughput of the generate stage against a server of known capacity.

A loopback server (tests/fixtures/fake_server.py, in its own process so its CPU is not counted)
answers every chat request after a fixed delay. At concurrency C and delay D its capacity is
C / D requests/s (128 at the defaults). The script runs, against the same server in the same
process:
1. a bare AsyncOpenAI loop (C in flight, no parsing, no persistence): the client's ceiling;
2. ``run_generate`` (probe, retries armed, parsing, Parquet shards, manifest).
It prints requests/s, the share of capacity, client CPU per request and stage/bare ratio, and
the stage's share of C / (its median latency): on a loaded machine the server's answers come
later than D, and that figure tells a slow client apart from a slow server.

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


def stage_round(url: str, n: int, concurrency: int) -> tuple[float, float, dict]:
    from eagle3_core.generate.config import GenerateConfig, PromptSource
    from eagle3_core.generate.stage import run_generate

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "prompts.jsonl"
        tag = os.urandom(4).hex()  # fresh prompts each round: nothing to resume
        src.write_text("".join(json.dumps({"prompt": f"stage {tag} {i}"}) + "\n" for i in range(n)))
        cfg = GenerateConfig(prompts=PromptSource(input=str(src)), base_urls=[url], concurrency=concurrency,
                             max_tokens=64)
        result = {}
        wall, cpu = measure(lambda: result.setdefault("m", run_generate(cfg, Path(tmp) / "out")))
    manifest = result["m"]
    assert manifest.counts["accepted"] == n, manifest.counts
    return wall, cpu, {"generate_s": manifest.timings["generate"], "probe_s": manifest.timings["probe"],
                       "latency_p50_s": manifest.details["latency_s"]["p50"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3840, help="requests per round")
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternating bare/stage rounds (the machine may be shared)")
    args = parser.parse_args()
    n, capacity = args.requests, args.concurrency / args.delay
    server, url = start_server(args.delay)
    rounds = []
    try:
        for _ in range(args.rounds):
            bare_wall, bare_cpu = measure(lambda: asyncio.run(bare_loop(url, n, args.concurrency)))
            stage_wall, stage_cpu, timings = stage_round(url, n, args.concurrency)
            bare, overall, sustained = n / bare_wall, n / stage_wall, n / timings["generate_s"]
            rounds.append({
                "bare_req_s": round(bare, 2), "bare_share": round(bare / capacity, 4),
                "bare_cpu_ms_per_req": round(1000 * bare_cpu / n, 3),
                "stage_req_s_sustained": round(sustained, 2), "stage_share_sustained": round(sustained / capacity, 4),
                "stage_req_s_overall": round(overall, 2), "stage_share_overall": round(overall / capacity, 4),
                "stage_cpu_ms_per_req": round(1000 * stage_cpu / n, 3),
                "stage_over_bare_sustained": round(sustained / bare, 4),
                "stage_over_bare_overall": round(overall / bare, 4), **timings,
                # C / p50 latency: what C in-flight requests can give at the latency the server
                # actually delivered; near 1.0 means the client kept every slot busy
                "stage_share_of_latency_bound": round(sustained / (args.concurrency / timings["latency_p50_s"]), 4),
                "load_avg_1m": round(os.getloadavg()[0], 2)})
            print(json.dumps(rounds[-1]), flush=True)
    finally:
        server.terminate()
        server.wait()
    print(json.dumps({"requests_per_round": n, "concurrency": args.concurrency, "delay_s": args.delay,
                      "capacity_req_s": capacity, "cpu_count": os.cpu_count(), "rounds": len(rounds)}))


if __name__ == "__main__":
    main()
