"""Two `eagle3 generate` runs sharing one endpoint's limit through one real `prefect server`.

Starts `prefect server start` (its own PREFECT_HOME, the lease sweep every 2 s), one loopback
server (``--delay`` s a request), creates the endpoint's limit (``--limit``), then starts two
CLI runs of ``--requests`` prompts each at once, each asking for the whole limit. From the
server's log: the peak of the two runs' requests in flight together, the steady rate while both
had work (requests started from 3 s after the later one's first until the earlier one's last,
over that span) against the capacity (limit / mean latency), and each run's share of it.

    .venv/bin/python benchmarks/bench_generate_shared.py [--requests 1500] [--limit 64] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent

from benchmarks.bench_generate import server_log, start_server  # noqa: E402
from tests.fixtures.prefect_server import running_prefect_server  # noqa: E402

SERVER_SETTINGS = {  # the lease sweep every 2 s: a killed run's slots come back soon
    "PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS": "2",
    "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1500, help="prompts per run")
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-shared-"))
    with running_prefect_server(tmp, **SERVER_SETTINGS) as env:
        server, url = start_server(args.delay, "")
        os.environ["PREFECT_API_URL"] = env["PREFECT_API_URL"]  # before Prefect is imported: it reads settings once
        try:
            create_limit(url, args.limit)
            runs = [start_run(tmp, name, url, args, env) for name in "AB"]
            for run in runs:
                assert run.wait(timeout=1200) == 0, (tmp / "A.log").read_text()[-2000:]
            log = [(p, s, e) for p, s, e in server_log(url)["log"] if p[:2] in ("A ", "B ")]
        finally:
            server.terminate()
    print(json.dumps(figures(log, args), indent=1))


def create_limit(url: str, limit: int) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    from tasks.endpoints import endpoint_limit_name

    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=endpoint_limit_name(url), limit=limit))


def start_run(tmp: Path, name: str, url: str, args, env: dict) -> subprocess.Popen:
    """One `eagle3 generate` run of ``args.requests`` prompts named ``{name} {i}``."""
    src = tmp / f"{name}.jsonl"
    src.write_text("".join(json.dumps({"prompt": f"{name} {i}"}) + "\n" for i in range(args.requests)))
    command = [str(BIN / "eagle3"), "generate", "--input", str(src), "--base-url", url, "--out", str(tmp / name)]
    return subprocess.Popen(
        [*command, "--concurrency", str(args.limit), "--no-progress"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / f"{name}.log").open("wb"),
    )


def figures(log: list, args) -> dict:
    """The peak together, each run's share and the throughput over the window both ran in."""
    events = sorted([(s, 1) for _, s, _ in log] + [(e, -1) for _, _, e in log])
    starts = {w: sorted(s for p, s, _ in log if p[0] == w) for w in "AB"}
    lo = max(starts["A"][0], starts["B"][0]) + 3.0
    hi = min(starts["A"][-1], starts["B"][-1])
    both = [p[0] for p, s, _ in log if lo <= s <= hi]
    mean = sum(e - s for _, s, e in log) / len(log)
    return {
        "requests_per_run": args.requests,
        "limit": args.limit,
        "delay_s": args.delay,
        "peak_in_flight_together": max(itertools.accumulate(d for _, d in events)),
        "capacity_req_s": round(args.limit / mean, 2),
        "both_window_s": round(hi - lo, 2),
        "together_req_s": round(len(both) / (hi - lo), 2),
        "together_over_capacity": round(len(both) / (hi - lo) * mean / args.limit, 4),
        "share_a": round(both.count("A") / len(both), 4),
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    main()
