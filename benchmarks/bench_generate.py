"""Throughput of the generate stage beside a bare AsyncOpenAI loop, on one server, per scenario.

A loopback server (tests/fixtures/fake_server.py, in its own process so its CPU is not counted)
answers after ``--delay`` seconds on average, with the scenario's faults (``Mix``):

- ``plain``: every answer good, fixed latency;
- ``a``: 2% of prompts never return reasoning (retried, then rejected);
- ``b``: 5% of prompts answered 8x slower;
- ``c``: the seeds' mix: 8% of requests time out, 1% answer 503, 2% of prompts never reason,
  log-normal latency (sigma 0.5).

Against the same server the script runs, one after the other:
1. a bare AsyncOpenAI loop: ``--concurrency`` in flight, typed ``create``, each prompt retried at
   once (no backoff) until it has reasoning or ``--max-retries`` run out, same request timeout;
2. the stage: ``eagle3 generate``'s flow (``--via flow``, the default: Prefect tasks, the shared
   endpoint limit in leased chunks) or ``run_generate`` alone (``--via core``); both probe,
   parse, back off with jitter, write Parquet shards and a manifest.

Every figure comes from the server's own log of each request (start, end): the steady rate
counts the requests started between the 10th and the 90th percentile start; capacity is
concurrency / mean time a request held the server (a timed-out one until the client hung up);
the ideal wall time is requests x mean / concurrency plus the longest chain of one prompt's
attempts (first start to last end).

    .venv/bin/python benchmarks/bench_generate.py --scenario c [--requests 2000] [--concurrency 64]
        [--endpoints 1] [--delay 0.5] [--timeout S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_core.ports import free_port  # noqa: E402

SCENARIOS = {  # the server's Mix, and a request timeout that no good answer reaches (x delay)
    "plain": ("", 4.0),
    "a": ("never_reasoning=0.02", 4.0),
    "b": ("slow_share=0.05,slow_factor=8", 20.0),
    "c": ("stall=0.08,http_503=0.01,never_reasoning=0.02,sigma=0.5", 6.0),
}


def start_server(delay: float, mix: str) -> tuple[subprocess.Popen, str]:
    args = [sys.executable, "-m", "tests.fixtures.fake_server", "--port", str(free_port()), "--delay", str(delay)]
    proc = subprocess.Popen(args + (["--mix", mix] if mix else []), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def server_log(url: str, reset: bool = False) -> dict:
    request = urllib.request.Request(f"{url}/_log", method="POST" if reset else "GET")
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


async def bare_loop(urls: list[str], n: int, concurrency: int, timeout: float, max_retries: int) -> None:
    """``concurrency`` in flight per endpoint; prompt i goes to endpoint i mod len(urls)."""
    import httpx
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    clients = [
        AsyncOpenAI(
            base_url=url,
            api_key="EMPTY",
            max_retries=0,
            timeout=timeout,
            http_client=DefaultAsyncHttpxClient(limits=limits, timeout=timeout),
        )
        for url in urls
    ]
    gates = [asyncio.Semaphore(concurrency) for _ in urls]

    async def one(i: int) -> None:
        client, gate = clients[i % len(urls)], gates[i % len(urls)]
        for _ in range(max_retries + 1):
            async with gate:
                try:
                    reply = await client.chat.completions.create(
                        model="fake-model",
                        messages=[{"role": "user", "content": f"bare {i}"}],
                        max_tokens=64,
                        extra_body={"return_token_ids": True},
                    )
                except Exception:
                    continue
            if getattr(reply.choices[0].message, "reasoning", None):
                return

    await asyncio.gather(*(one(i) for i in range(n)))
    for client in clients:
        await client.close()


def stage_round(urls: list[str], n: int, concurrency: int, timeout: float, max_retries: int, via: str) -> dict:
    """``eagle3 generate``'s flow (``via="flow"``: Prefect tasks, the shared endpoint limit held
    in leased chunks) or ``run_generate`` alone (``via="core"``)."""
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.stages.generate.config import GenerateConfig
    from eagle3_core.stages.generate.stage import run_generate

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "prompts.jsonl"
        src.write_text("".join(json.dumps({"prompt": f"stage {i}"}) + "\n" for i in range(n)))
        cfg = GenerateConfig(
            prompts=PromptSource(input=str(src)),
            base_urls=urls,
            concurrency=concurrency,
            max_tokens=64,
            request_timeout=timeout,
            max_retries=max_retries,
        )
        if via == "flow":
            from flows.stages import stage_flow

            manifest = stage_flow("generate")(cfg, str(Path(tmp) / "out")).model_dump(mode="json")
        else:
            manifest = run_generate(cfg, Path(tmp) / "out").model_dump(mode="json")
    c, details = manifest["counts"], manifest["details"]
    assert c["accepted"] + c["rejected"] + c["skipped"] == c["input"] == n, c
    return {
        "accepted": c["accepted"],
        "rejected": details["reject_reasons"],
        "client_latency_s": details["latency_s"],
        "retries": details["retries_by_reason"],
    }


def figures(log: list, concurrency: int, prefix: str) -> dict:
    """Steady rate, capacity and the ideal wall time, from the servers' log of one phase
    (``concurrency``: in flight over all endpoints)."""
    mine = [(p, s, e) for p, s, e in log if p.startswith(prefix)]
    starts = sorted(s for _, s, _ in mine)
    n = len(starts)
    lo, hi = starts[n // 10], starts[(9 * n) // 10]
    steady = ((9 * n) // 10 - n // 10) / (hi - lo)
    mean = sum(e - s for _, s, e in mine) / n
    chains = defaultdict(lambda: [float("inf"), 0.0])
    for p, s, e in mine:
        chains[p][0], chains[p][1] = min(chains[p][0], s), max(chains[p][1], e)
    longest = max(e - s for s, e in chains.values())
    wall = max(e for _, _, e in mine) - starts[0]
    held = sum(max(0.0, min(e, hi) - max(s, lo)) for _, s, e in mine)  # request-seconds inside the window
    ideal = n * mean / concurrency + longest
    return {
        "requests": n,
        "steady_req_s": round(steady, 2),
        "mean_latency_s": round(mean, 4),
        "capacity_req_s": round(concurrency / mean, 2),
        "steady_over_capacity": round(steady * mean / concurrency, 4),
        "wall_s": round(wall, 2),
        "ideal_wall_s": round(ideal, 2),
        "wall_over_ideal": round(wall / ideal, 4),
        "longest_chain_s": round(longest, 2),
        "steady_mean_in_flight": round(held / (hi - lo), 2),
    }


def measure(fn) -> tuple[object, float]:
    cpu = time.process_time()
    result = fn()
    return result, time.process_time() - cpu


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="c")
    parser.add_argument("--requests", type=int, default=2000, help="prompts per loop")
    parser.add_argument("--concurrency", type=int, default=64, help="in flight per endpoint")
    parser.add_argument("--endpoints", type=int, default=1, help="servers (one process each), balanced by the client")
    parser.add_argument("--delay", type=float, default=0.5, help="mean latency of a good answer (s)")
    parser.add_argument("--timeout", type=float, default=None, help="request deadline (s); default: the scenario's")
    parser.add_argument("--max-retries", type=int, default=5)
    parser.add_argument(
        "--via",
        choices=["flow", "core"],
        default="flow",
        help="flow: `eagle3 generate`'s Prefect flow (an ephemeral API in a fresh PREFECT_HOME "
        "unless PREFECT_API_URL is set); core: run_generate alone",
    )
    return parser.parse_args()


def main() -> None:
    args = parse()
    if args.via == "flow" and "PREFECT_API_URL" not in os.environ:
        os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="bench-prefect-")
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")  # a loaded 2-core box
    mix, timeout_x = SCENARIOS[args.scenario]
    timeout = args.timeout or timeout_x * args.delay
    n, c = args.requests, args.concurrency
    servers = [start_server(args.delay, mix) for _ in range(args.endpoints)]
    urls = [url for _, url in servers]
    try:
        bare, _, _ = timed_round(
            urls, lambda: asyncio.run(bare_loop(urls, n, c, timeout, args.max_retries)), c, "bare "
        )
        stage, outcome, peaks = timed_round(
            urls, lambda: stage_round(urls, n, c, timeout, args.max_retries, args.via), c, "stage "
        )
    finally:
        for server, _ in servers:
            server.terminate()
            server.wait()
    settings = {"scenario": args.scenario, "via": args.via, "mix": mix, "prompts": n, "endpoints": len(urls)}
    settings |= {"concurrency_per_endpoint": c, "delay_s": args.delay, "timeout_s": timeout}
    report = settings | {"cpu_count": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}
    report |= {"bare": bare, "stage": stage | outcome}
    report |= {"stage_over_bare_steady": round(stage["steady_req_s"] / bare["steady_req_s"], 4)}
    print(json.dumps(report | {"server_in_flight_peak": peaks}, indent=1))


def timed_round(urls: list[str], fn, c: int, prefix: str) -> tuple[dict, object, list]:
    """One loop against freshly reset server logs: its figures (with CPU per request), its
    outcome, and each server's in-flight peak."""
    for url in urls:
        server_log(url, reset=True)
    outcome, cpu = measure(fn)
    answers = [server_log(url) for url in urls]
    found = figures([entry for a in answers for entry in a["log"]], c * len(urls), prefix)
    found["cpu_ms_per_req"] = round(1000 * cpu / found["requests"], 3)
    return found, outcome, [a["in_flight_peak"] for a in answers]


if __name__ == "__main__":
    main()
