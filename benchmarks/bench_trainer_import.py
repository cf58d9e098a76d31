"""What a trainer's start costs before its first step: importing DeepSpeed and building its engine
(``deepspeed.initialize`` with the generated config, on a one-layer model), as the trainer does it
(``stages/train/startup.py``: no mlflow behind DeepSpeed's import, no TorchInductor where nothing
compiles) against DeepSpeed's defaults. Each case runs in a fresh process on the CPU accelerator
(gloo, one rank), rounds alternated so a drifting machine weighs on both alike.

    .venv/bin/python benchmarks/bench_trainer_import.py --rounds 5

Prints each process's wall seconds and CPU-seconds (user + system, from ``wait4``) and the medians.
The limit it should approach: ``import torch`` alone, which every trainer needs (printed too).
Results: benchmarks/train.md ("A trainer's start").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ENGINE = """
import os, torch
from eagle3_core.ports import free_port
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.ds_config import deepspeed_config
from eagle3_core.stages.train.startup import import_deepspeed, skip_unused_compilers
for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
    os.environ[key] = value
os.environ["MASTER_PORT"] = str(free_port())
cfg = TrainConfig()
if {trainers}:
    skip_unused_compilers(cfg)
    deepspeed = import_deepspeed()
else:
    import deepspeed
deepspeed.init_distributed(dist_backend="gloo")
model = torch.nn.Linear(64, 64)
deepspeed.initialize(model=model, model_parameters=list(model.parameters()), config=deepspeed_config(cfg, 10, False))
"""
CASES = {
    "import torch (the floor)": "import torch",
    "DeepSpeed's defaults": ENGINE.format(trainers=False),
    "the trainer's start": ENGINE.format(trainers=True),
}


def measure(code: str) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh interpreter running ``code`` on the CPU accelerator."""
    env = {k: v for k, v in os.environ.items() if k != "TORCHDYNAMO_DISABLE"} | {"DS_ACCELERATOR": "cpu"}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed:\n{proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    measure(CASES["the trainer's start"])  # warm the page cache (and DeepSpeed's built op) once, for all alike
    for round_no in range(args.rounds):
        for name, code in CASES.items():
            wall, cpu = measure(code)
            figures[name].append((wall, cpu))
            print(f"round {round_no + 1}: {name}: {wall:.2f} s wall, {cpu:.2f} CPU-s", flush=True)
    print(f"\nmedians over {args.rounds} rounds ({os.cpu_count()} CPUs):")
    for name, rows in figures.items():
        wall, cpu = (statistics.median(column) for column in zip(*rows))
        print(f"  {name}: {wall:.2f} s wall, {cpu:.2f} CPU-s")


if __name__ == "__main__":
    main()
