"""What a server outage in the middle of a generate run costs: prompts lost, time to notice, rerun.

A loopback server (tests/fixtures/fake_server.py, its own process) answers after ``--delay`` s;
``--up`` seconds into the run it is killed (connection refused, as a crashed vLLM), and it comes
back on the same port ``--down`` seconds later. ``run_generate`` runs with the default retries
(5, backoff from 1 s doubling to 60 s, full jitter) at ``--concurrency`` in flight, twice:

1. ``outage_seconds`` larger than the outage: the endpoint's breaker opens, the prompts wait
   (none is rejected for the outage) and the run goes on once a half-open probe finds the server
   back (before the breakers, every prompt whose retries ran out became a reject);
2. ``outage_seconds`` = ``--outage-seconds``: the run stops that long after the breaker opened.
Either way it keeps what finished, and once the server is back the rerun sends every prompt left
open.

Figures: rows left open, the seconds from the kill to the stop, and after the rerun
its outcome and the prompts it sent (the outage's rejects plus those the first run never started).

    .venv/bin/python benchmarks/bench_outage.py [--prompts 3000] [--concurrency 64] [--delay 0.5]
        [--up 10] [--down 60] [--outage-seconds 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_core.ports import free_port  # noqa: E402


def serve(port: int, delay: float) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.fixtures.fake_server", "--port", str(port), "--delay", str(delay)]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc.stdout.readline()  # the URL: it listens
    return proc


def outage(port: int, delay: float, up: float, down: float, server: list[subprocess.Popen]) -> threading.Thread:
    """Kill the server ``up`` s from now and start it again ``down`` s later."""

    def run() -> None:
        time.sleep(up)
        server[0].kill()
        server[0].wait()
        time.sleep(down)
        server[0] = serve(port, delay)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def one_run(args, outage_seconds: float) -> dict:
    from eagle3_core.errors import StageError
    from eagle3_core.run.manifest import read_manifest
    from eagle3_core.stages.generate.stage import run_generate

    port = free_port()
    server = [serve(port, args.delay)]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "prompts.jsonl", Path(tmp) / "out"
        src.write_text("".join(json.dumps({"prompt": f"outage {i}"}) + "\n" for i in range(args.prompts)))
        cfg = outage_config(args, src, port, outage_seconds)
        killer, started, stopped = outage(port, args.delay, args.up, args.down, server), time.monotonic(), None
        try:
            run_generate(cfg, out)
        except StageError as exc:
            stopped = time.monotonic() - started - args.up
            print(f"  stopped: {str(exc).splitlines()[0][:140]}", flush=True)
        first = read_manifest(out)
        lost = first.counts["open"]  # rows the outage left open (health.is_open): the rerun sends them
        figures = {
            "outage_seconds": outage_seconds,
            "status": first.status,
            "wall_s": round(time.monotonic() - started, 1),
            "open_rows": lost,
            "stopped_s_after_the_kill": round(stopped, 1) if stopped is not None else None,
        }
        if first.status == "failed":
            killer.join()  # the server is back
            figures |= rerun(cfg, out)
        killer.join()
        server[0].kill()
    return figures


def outage_config(args, src: Path, port: int, outage_seconds: float):
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.stages.generate.config import GenerateConfig

    return GenerateConfig(
        prompts=PromptSource(input=str(src)),
        base_urls=[f"http://127.0.0.1:{port}/v1"],
        concurrency=args.concurrency,
        max_tokens=64,
        request_timeout=20 * args.delay,
        outage_seconds=outage_seconds,
    )


def rerun(cfg, out: Path) -> dict:
    """The same run again once the server is back: what it sent and how it ended."""
    from eagle3_core.stages.generate.stage import run_generate

    again = run_generate(cfg, out)
    return {
        "rerun_status": again.status,
        "rerun_accepted": again.counts["accepted"],
        "rerun_rejected": again.counts["rejected"],
        "rerun_sent": again.counts["input"] - again.counts["resumed"] - again.counts["skipped"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--up", type=float, default=10.0, help="seconds before the server is killed")
    parser.add_argument("--down", type=float, default=60.0, help="seconds the server stays down")
    parser.add_argument("--outage-seconds", type=float, default=30.0)
    args = parser.parse_args()
    print(f"{args.prompts} prompts, {args.concurrency} in flight, server killed at {args.up:g} s for {args.down:g} s")
    for seconds in (10 * args.down, args.outage_seconds):
        print(json.dumps(one_run(args, seconds)), flush=True)


if __name__ == "__main__":
    main()
