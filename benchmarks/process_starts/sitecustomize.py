"""Every subprocess a test run starts, by kind and by test: where the suite's process starts come
from on a machine without the kernel's process accounting (``suite_cpu.py`` needs Debian's ``acct``).

Loaded by each Python process that has this folder on ``PYTHONPATH`` (the pytest workers, the
``eagle3`` command lines, the trainers, vLLM's API servers: the variable is inherited); each
``subprocess.Popen`` appends one JSON line to ``$PROCESS_STARTS``: its argv, pid, parent pid and the
test that was running (``PYTEST_CURRENT_TEST``, which children inherit too). A process started by
``multiprocessing`` (vLLM's engine core and worker) is not a ``Popen`` and is not counted, nor is
what a process started without ``PYTHONPATH`` starts (the watchdog's extraction engine). Python
loads the first ``sitecustomize`` on the path only, so this and ``benchmarks/avx2_sim``'s do not
combine: run them separately::

    PROCESS_STARTS=/tmp/starts.jsonl PYTHONPATH=benchmarks/process_starts CI=true \\
        EAGLE3_REQUIRE_SERVICES=1 .venv/bin/pytest -n 3 --dist loadgroup --no-loadscope-reorder
    python3 benchmarks/process_starts/sitecustomize.py /tmp/starts.jsonl
"""

import json
import os
import subprocess
import sys
import time

KINDS = (  # (kind, a fragment of the joined argv that marks it), first match wins
    ("watchdogs", "serve/watchdog.py"),  # its argv carries its server's: counted before it
    ("vLLM API servers", ".venv-vllm/bin/python -m vllm.entrypoints.openai.api_server"),  # not the tests' stand-in
    ("trainers", "eagle3_core.stages.train.main"),
    ("deepspeed launchers", "deepspeed --num_gpus"),
    ("eagle3 command lines", "bin/eagle3 "),
    ("Prefect flow runs", "prefect.engine"),
)


def record(popen: subprocess.Popen, args) -> None:
    argv = [str(a) for a in (args if isinstance(args, (list, tuple)) else [args])]
    row = {"t": time.time(), "pid": popen.pid, "ppid": os.getpid(), "argv": argv[:8]}
    row["test"] = os.environ.get("PYTEST_CURRENT_TEST", "").split(" (")[0]
    with open(os.environ["PROCESS_STARTS"], "a", encoding="utf-8") as log:
        log.write(json.dumps(row) + "\n")  # one short write per line: safe to append from many processes


def install() -> None:
    start = subprocess.Popen.__init__

    def logged(self, args, *rest, **kwargs):
        start(self, args, *rest, **kwargs)
        try:
            record(self, args)
        except OSError:  # a full or missing log never fails the process being measured
            pass

    subprocess.Popen.__init__ = logged


def summary(path: str) -> None:
    import collections

    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    by_kind, by_test = collections.Counter(), collections.defaultdict(collections.Counter)
    for row in rows:
        joined = " ".join(row["argv"])
        kind = next((name for name, mark in KINDS if mark in joined), None)
        if kind:
            by_kind[kind] += 1
            by_test[kind][row["test"].split("::")[0] or "(session set-up)"] += 1
    print(f"{len(rows)} subprocess starts")
    for kind, count in by_kind.most_common():
        print(f"{count:5d}  {kind}: " + ", ".join(f"{t} {n}" for t, n in by_test[kind].most_common(5)))


if __name__ == "__main__":
    summary(sys.argv[1])
elif os.environ.get("PROCESS_STARTS"):
    install()
