"""Where eagle3 runs vLLM's model in its engine's own process (serve/one_process.py): a CPU engine that
would compute in one thread. The rule here; the answers on real vLLM, against vLLM's own two-process
executor, in tests/integration/test_generate_on_real_vllm.py (its module's server is one)."""

from __future__ import annotations

import sys

import pytest

from eagle3_core.serve import one_process
from eagle3_core.serve.config import ServeConfig
from eagle3_core.serve.one_process import computes_in_one_thread
from eagle3_core.serve.vllm_server import VLLMServer


@pytest.mark.parametrize(
    ("bind", "cpus", "one"),
    [
        (None, 1, True),
        (None, 2, True),  # vLLM's auto binding leaves one core to its front end: the worker gets one
        ("auto", 2, True),
        (None, 3, False),
        ("auto", 16, False),
        ("0", 2, False),  # a binding the user named is vLLM's to apply
        ("nobind", 2, False),
    ],
)
def test_one_thread_where_vllms_auto_binding_gives_the_model_one_core(bind, cpus, one):
    env = {} if bind is None else {"VLLM_CPU_OMP_THREADS_BIND": bind}
    assert computes_in_one_thread(env, cpus) is one


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.setattr(one_process.os, "sched_getaffinity", lambda pid: {0, 1})


def command_and_env(cfg: ServeConfig) -> tuple[list[str], bool]:
    server = VLLMServer("model", cfg)
    return server.command(sys.executable), server.in_one_process


def test_a_cpu_server_on_two_cpus_runs_its_model_in_the_engines_process(two_cpus):
    command, single = command_and_env(ServeConfig(device="cpu"))
    assert single and command[-2:] == ["--distributed-executor-backend", "uni"]


@pytest.mark.parametrize(
    "fields",
    [
        {"device": "cuda"},  # one GPU: uni is vLLM's own default there
        {"device": "cpu", "extra_args": ["--distributed-executor-backend", "mp"]},
        {"device": "cpu", "extra_args": ["--tensor-parallel-size=2"]},
    ],
)
def test_a_gpu_a_named_executor_or_parallel_ranks_are_left_to_vllm(two_cpus, fields):
    command, single = command_and_env(ServeConfig(**fields))
    assert not single and command.count("--distributed-executor-backend") == len(
        [a for a in fields.get("extra_args", []) if a == "--distributed-executor-backend"]
    )


def test_the_extraction_engine_is_one_process_on_two_cpus_and_left_to_vllm_for_two_ranks(two_cpus):
    assert one_process.one_process("cpu", ranks=1)
    assert not one_process.one_process("cpu", ranks=2)
