"""vLLM's model in its engine's own process, on a CPU where it would compute in one thread anyway.

On a CPU, vLLM runs the model in a worker process of its own (its ``mp`` executor), spawned after the
engine core so that OpenMP's threads can be bound to the cores that worker gets
(``VLLM_CPU_OMP_THREADS_BIND``; ``auto`` leaves one core to the front end). Where that is one core,
the binding buys nothing and the worker costs a third import of vLLM and torch (what a start costs either
way: benchmarks/serve.md), and two of the extraction engine's three processes.
There eagle3 runs the model inside the engine (``uni``; ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, without
which vLLM's CPU platform turns ``uni`` back into ``mp``, and with which an offline ``vllm.LLM`` also keeps
its engine core in its own process). The model computes in one thread either way; the answers are the
same tokens (tests/serve/test_one_process.py).

Left to vLLM: a GPU (``uni`` is already its default for one GPU), more than one rank, an explicit
binding (``VLLM_CPU_OMP_THREADS_BIND`` naming cores, or ``nobind``), and a machine where ``auto`` gives
the worker more than one core.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

FLAGS = ("--distributed-executor-backend", "uni")
ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
# flags of serve.extra_args after which the executor is vLLM's choice (the parallel ones need its mp executor)
LEFT_TO_VLLM = {
    "--distributed-executor-backend",
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "-pp",
    "--data-parallel-size",
    "-dp",
}
# vLLM's ``auto`` binding reserves this many CPUs for the front end (VLLM_CPU_NUM_OF_RESERVED_CPU's default)
RESERVED_BY_VLLM = 1


def computes_in_one_thread(env: Mapping[str, str] | None = None, cpus: int | None = None) -> bool:
    """Whether a vLLM engine started from here on this CPU would give its model one core: ``auto``
    binding (the default) where this process may run on at most ``1 + RESERVED_BY_VLLM`` CPUs."""
    env = os.environ if env is None else env
    if env.get("VLLM_CPU_OMP_THREADS_BIND", "auto") != "auto":
        return False
    cpus = len(os.sched_getaffinity(0)) if cpus is None else cpus
    return cpus <= 1 + RESERVED_BY_VLLM


def one_process(device: str, extra_args: Sequence[str] = (), ranks: int = 1) -> bool:
    """Whether to run the model in the engine's process: a CPU engine of one rank that computes in one
    thread, with no executor or parallelism named by the user (``serve.extra_args``)."""
    named = any(arg.split("=")[0] in LEFT_TO_VLLM for arg in extra_args)
    return device == "cpu" and ranks == 1 and not named and computes_in_one_thread()
