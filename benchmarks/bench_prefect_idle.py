"""What an idle Prefect test API costs: the session server of tests/fixtures/prefect.py, with Prefect's
defaults and with the services no test uses turned off (``QUIET_SERVER``), CPU-seconds of its process
over a quiet window after its start, rounds alternated (the VM drifts within the hour). Each test
worker keeps one such server for the whole session, so its idle cost is paid some 25 minutes three
times over; the limit it should approach is zero.

    .venv/bin/python benchmarks/bench_prefect_idle.py [--seconds 45] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cost(quiet: bool, seconds: float) -> tuple[float, float]:
    """(CPU-seconds of the server's start, CPU-seconds in ``seconds`` idle after it)."""
    from prefect.testing.utilities import prefect_test_harness

    from tests.fixtures.prefect import quiet_server_settings

    before = set(subprocess.run(["pgrep", "-f", "uvicorn"], capture_output=True, text=True).stdout.split())
    with quiet_server_settings() if quiet else contextlib.nullcontext(), prefect_test_harness(120):
        found = set(subprocess.run(["pgrep", "-f", "uvicorn"], capture_output=True, text=True).stdout.split())
        pid = int(max(found - before, key=int))
        started = cpu_seconds(pid)
        time.sleep(seconds)
        return started, cpu_seconds(pid) - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for r in range(args.rounds):
        for quiet in (False, True) if r % 2 == 0 else (True, False):
            start, idle = idle_cost(quiet, args.seconds)
            name = "quiet (tests/fixtures/prefect.py)" if quiet else "Prefect's defaults"
            share = 100 * idle / args.seconds
            print(
                f"{name:34} start {start:5.1f} CPU-s, idle {idle:4.2f} CPU-s in {args.seconds:.0f} s ({share:.1f} % of a core)"
            )


if __name__ == "__main__":
    main()
