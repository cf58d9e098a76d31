"""Many endpoints, one of them dying or hanging mid-run: does the run keep the healthy ones' pace, lose nothing?

Eight loopback servers (tests/fixtures/fake_server.py, each its own process; log-normal latency
around ``--delay``, sigma 0.5; 2% of prompts never reasoned on, as real data has: each a final
``empty_reasoning`` reject after its retries), ``--concurrency`` in flight on each. At a third of
the expected run (counted from the end of the probe) one server is SIGKILLed; at two thirds it
starts again on the same port (``--stay-down``: never). ``--fault hang`` SIGSTOPs it instead and
never resumes it: the kernel still accepts connections and requests, and nothing answers (a hung
GPU worker). ``run_generate`` runs once with the defaults (breaker: 5 failures in a row, 1 s
backoff doubling to 30 s; overdue past 3x the slowest recent answer, at least 10 s; probes of
30 s) and ``request_timeout`` ``--timeout`` (default 20x the delay).

Figures: accepted / open / rejected rows (expected: all accepted, none open or rejected, in the
one run), the rows the restarted server answered after it came back, and throughput against
the capacity of the endpoints that were up: ``64 / delay`` rows/s each, integrated over the time
each was up (the overall ratio, fill and drain included), and the same ratio inside the window
when one endpoint was down (the steady state the breaker is for).

    .venv/bin/python benchmarks/bench_endpoints.py [--endpoints 8] [--concurrency 64] [--delay 2.0]
        [--prompts 8000] [--fault kill|hang] [--stay-down] [--timeout S] [--never-reasoning 0.02]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_core.ports import free_port  # noqa: E402


def serve(port: int, delay: float, never_reasoning: float = 0.02) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.fixtures.fake_server", "--port", str(port), "--delay", str(delay)]
    proc = subprocess.Popen(
        [*args, "--mix", f"sigma=0.5,never_reasoning={never_reasoning}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    proc.stdout.readline()  # the URL: it listens
    return proc


class ProbeClock:
    """A reporter that notes when the probe is done: the run's clock starts there."""

    def __init__(self) -> None:
        self.probed = threading.Event()
        self.at = 0.0

    def progress(self, stage, done, total, **figures) -> None:
        pass

    def log(self, message: str) -> None:
        if message.startswith("probe:"):
            self.at = time.time()
            self.probed.set()


def chaos(args, port: int, kill_at: float, back_at: float, servers: list, marks: dict, clock: ProbeClock):
    """SIGKILL (or SIGSTOP: ``--fault hang``) ``servers[0]`` at ``kill_at`` s, start it again at
    ``back_at`` s (from the probe) unless it stays down."""

    def run() -> None:
        clock.probed.wait()
        t0 = clock.at
        time.sleep(kill_at)
        if args.fault == "hang":
            servers[0].send_signal(signal.SIGSTOP)
        else:
            servers[0].kill()
            servers[0].wait()
        marks["killed"] = time.time()
        if args.stay_down or args.fault == "hang":
            return
        time.sleep(max(0.0, back_at - (time.time() - t0)))
        servers[0] = serve(port, args.delay, args.never_reasoning)
        marks["back"] = time.time()

    thread = threading.Thread(target=run, daemon=True)  # never joined with --healthy
    thread.start()
    return thread


def figures(out: Path, url0: str, args, marks: dict, started: float, ended: float) -> dict:
    import polars as pl

    from eagle3_core.run.manifest import read_manifest

    manifest = read_manifest(out)
    marks.setdefault("back", ended)  # stayed down to the end
    rows = pl.concat(
        [pl.read_parquet(f, columns=["endpoint", "created_at"]) for f in (out / "accepted").glob("part-*.parquet")]
    )
    per_endpoint = args.concurrency / args.delay  # rows/s one endpoint can give
    down_for = 0.0 if args.healthy else marks["back"] - marks["killed"]
    up_in_window = args.endpoints - (0 if args.healthy else 1)
    capacity = per_endpoint * (args.endpoints * (ended - started) - down_for)
    window = rows.filter((pl.col("created_at") > marks["killed"] + args.delay) & (pl.col("created_at") < marks["back"]))
    window_s = marks["back"] - marks["killed"] - args.delay
    back = rows.filter((pl.col("endpoint") == url0) & (pl.col("created_at") > marks["back"]))
    return {
        "status": manifest.status,
        "accepted": manifest.counts["accepted"],
        "open": manifest.counts["open"],
        "rejected": manifest.counts["rejected"],
        "wall_s": round(ended - started, 1),
        "killed_at_s": round(marks["killed"] - started, 1),
        "back_at_s": round(marks["back"] - started, 1),
        "rows_from_the_restarted_server_after_it_came_back": back.height,
        "rejoined_s_after_restart": round(back["created_at"].min() - marks["back"], 1) if back.height else None,
        "throughput_rows_per_s": round(len(rows) / (ended - started), 1),
        "vs_capacity_of_endpoints_up": round(len(rows) / capacity, 3),
        "one_down_window_rows_per_s": round(window.height / window_s, 1),
        "one_down_window_vs_the_others": round(window.height / window_s / (per_endpoint * up_in_window), 3),
        "breaker_opened": manifest.details["breaker_opened"][url0],
        "retries": manifest.counts["retries"],
        "reject_reasons": manifest.details["reject_reasons"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--prompts", type=int, default=8000)
    parser.add_argument("--healthy", action="store_true", help="kill nothing: the baseline of the same run")
    parser.add_argument("--fault", choices=("kill", "hang"), default="kill")
    parser.add_argument("--stay-down", action="store_true", help="the killed server is not started again")
    parser.add_argument("--timeout", type=float, default=None, help="request_timeout (default 20x --delay)")
    parser.add_argument("--never-reasoning", type=float, default=0.02, help="share of prompts never reasoned on")
    args = parser.parse_args()
    ports = [free_port() for _ in range(args.endpoints)]
    servers = [serve(port, args.delay, args.never_reasoning) for port in ports]
    urls = [f"http://127.0.0.1:{port}/v1" for port in ports]
    try:
        print(json.dumps(one_run(args, urls, ports, servers)), flush=True)
    finally:
        for server in servers:
            server.kill()


def one_run(args, urls: list[str], ports: list[int], servers: list) -> dict:
    from eagle3_core.errors import StageError
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.stages.generate.config import GenerateConfig
    from eagle3_core.stages.generate.stage import run_generate

    expected = args.prompts / (args.endpoints * args.concurrency / args.delay)
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "prompts.jsonl", Path(tmp) / "out"
        src.write_text("".join(json.dumps({"prompt": f"endpoints {i}"}) + "\n" for i in range(args.prompts)))
        cfg = GenerateConfig(
            prompts=PromptSource(input=str(src)),
            base_urls=urls,
            concurrency=args.concurrency,
            max_tokens=64,
            request_timeout=args.timeout or 20 * args.delay,
        )
        marks: dict[str, float] = {}
        clock = ProbeClock()
        kill_at, back_at = (expected / 3, 2 * expected / 3) if not args.healthy else (1e9, 1e9)
        killer = chaos(args, ports[0], kill_at, back_at, servers, marks, clock)
        try:
            run_generate(cfg, out, clock)
        except StageError as exc:
            print(f"  stopped: {str(exc).splitlines()[0][:200]}", flush=True)
        ended = time.time()
        if args.healthy:  # no kill: the window is the middle third, the capacity all eight endpoints'
            marks |= {"killed": clock.at + expected / 3, "back": clock.at + 2 * expected / 3}
        else:
            killer.join()
        return figures(out, urls[0], args, marks, clock.at, ended)


if __name__ == "__main__":
    main()
