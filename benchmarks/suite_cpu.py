"""Where the test suite's CPU-seconds go: by kind of process (vLLM, trainers, Prefect, the pytest
workers) from the kernel's process accounting, and by test from a timeline this file records as a
pytest plugin. On 2 cores with three workers the cores are ~93 % busy, so the suite's wall time is
its CPU-seconds over two: a test that waits costs nothing, a process that starts costs its imports.

Run (root, Debian's ``acct``; the plugin is loaded from this folder)::

    apt-get install -y acct                           # turns accounting on, into /var/log/account/pacct
    accton off && : > /var/log/account/pacct && accton on   # an empty account (the kernel keeps its
                                                      # offset in an open file: empty it while off)
    PYTHONPATH=benchmarks SUITE_TIMELINE=/tmp/timeline.jsonl \\
        .venv/bin/pytest -n 3 --dist loadgroup --no-loadscope-reorder -p suite_cpu
    dump-acct /var/log/account/pacct > /tmp/acct.txt
    python3 benchmarks/suite_cpu.py /tmp/acct.txt [/tmp/timeline.jsonl]

A process is put under the first kind its own name, its ancestors' or its children's names show
(vLLM renames its processes ``VLLM::EngineCore``/``VLLM::Worker`` and its threads ``ZMQbg``;
torch.distributed's threads ``pt_gloo``/``pt_tcpstore``; a trainer runs ``ninja`` to load DeepSpeed's
CPU op). The timeline's per-test CPU counts the test's own process and the children it waited for;
a server stopped without a wait is left out. Without ``acct``, ``benchmarks/process_starts`` counts
the processes each test starts (not what they cost).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time

KINDS = (  # (kind, a fragment of a process name that marks it), first match wins
    ("vLLM (servers and extraction engines)", ("VLLM", "ZMQbg")),
    ("DeepSpeed trainers", ("gloo", "tcpstore", "ninja")),  # ninja: each loads DeepSpeed's CPU op
    ("Prefect servers", ("prefect",)),
    ("eagle3 command lines", ("eagle3",)),
)


def read_accounting(path: str) -> list[dict]:
    """dump-acct's rows: name, CPU seconds (user + system, in 1/100 s there), pid, parent pid."""
    rows = []
    for line in open(path, encoding="utf-8", errors="replace"):
        fields = [field.strip() for field in line.split("|")]
        if len(fields) < 11:
            continue
        cpu = (float(fields[2]) + float(fields[3])) / 100
        rows.append({"name": fields[0], "cpu": cpu, "pid": int(fields[9]), "ppid": int(fields[10])})
    return rows


def kind_of(row: dict, by_pid: dict, children: dict) -> str:
    names = [row["name"]]
    parent = by_pid.get(row["ppid"])
    while parent is not None and len(names) < 32:
        names.append(parent["name"])
        parent = by_pid.get(parent["ppid"])
    names += [child["name"] for child in children[row["pid"]]]
    joined = " ".join(names)
    for kind, marks in KINDS:
        if any(mark in joined for mark in marks):
            return kind
    return "other processes (command lines, stage subprocesses, tools)"


def by_kind(rows: list[dict]) -> tuple[collections.Counter, collections.Counter]:
    by_pid = {row["pid"]: row for row in rows}
    children = collections.defaultdict(list)
    for row in rows:
        children[row["ppid"]].append(row)
    controller = next((row for row in rows if row["name"] == "pytest"), None)
    workers = {child["pid"] for child in children[controller["pid"]]} if controller else set()
    seconds, count = collections.Counter(), collections.Counter()
    for row in rows:
        if controller and row["pid"] == controller["pid"]:
            kind = "pytest controller"
        elif row["pid"] in workers:
            kind = "pytest workers (in-process tests, collection)"
        else:
            kind = kind_of(row, by_pid, children)
        seconds[kind] += row["cpu"]
        count[kind] += 1
    return seconds, count


def print_kinds(path: str) -> None:
    seconds, count = by_kind(read_accounting(path))
    total = sum(seconds.values())
    print(f"{total:,.0f} CPU-seconds in all")
    for kind, cpu in seconds.most_common(12):
        print(f"{cpu:8.0f} s {100 * cpu / total:5.1f} %  {count[kind]:5d} processes  {kind}")


def print_tests(path: str, top: int = 25) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    start = min(row["t0"] for row in rows)
    print(f"\n{len(rows)} tests; each worker's last end (s): ", end="")
    ends = collections.defaultdict(float)
    for row in rows:
        ends[row["worker"]] = max(ends[row["worker"]], row["t1"] - start)
    print(", ".join(f"{worker} {end:.0f}" for worker, end in sorted(ends.items())))
    print("wall s  CPU s (own + waited children)  test")
    for row in sorted(rows, key=lambda row: row["t1"] - row["t0"], reverse=True)[:top]:
        print(f"{row['t1'] - row['t0']:6.1f}  {row['cpu']:6.1f}  {row['id']}")


# The plugin half (``-p suite_cpu``): one JSON line per test, its setup, call and teardown together.
try:
    import pytest
except ImportError:  # the report half runs without pytest
    pytest = None

if pytest is not None:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        wall, before = time.time(), os.times()
        yield
        after = os.times()
        fields = ("user", "system", "children_user", "children_system")
        cpu = sum(getattr(after, field) - getattr(before, field) for field in fields)
        record = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "-"), "id": item.nodeid, "t0": wall}
        record.update(t1=time.time(), cpu=round(cpu, 2))
        with open(os.environ.get("SUITE_TIMELINE", "suite-timeline.jsonl"), "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print_kinds(sys.argv[1])
    if len(sys.argv) > 2:
        print_tests(sys.argv[2])
