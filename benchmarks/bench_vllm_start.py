"""A vLLM server's start and first answers, with the model in the engine's own process (eagle3's choice on a
CPU of two cores: eagle3_core/serve/one_process.py) against vLLM's worker process (``mp``, named in
``serve.extra_args``), on the toy target served as eagle3 serves it.

Each round starts both, alternating which goes first (the VM's speed drifts within the hour), and times
the start to ``/health`` and a burst of greedy requests at once: the toy's training questions, every
third one with ``tools``, and one prompt too long for the context (vLLM answers 400; it must not stall
the others). The floor a start approaches is its processes' imports: ``python -c "import
vllm.entrypoints.openai.api_server"`` in vLLM's environment, printed first.

    .venv/bin/python benchmarks/bench_vllm_start.py [--rounds 2] [--requests 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOOLS = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}}}]
MP = ["--distributed-executor-backend", "mp"]


def import_floor(python: str) -> float:
    started = time.monotonic()
    subprocess.run([python, "-c", "import vllm.entrypoints.openai.api_server"], check=True, capture_output=True)
    return time.monotonic() - started


def ask(base_url: str, model: str, row: dict) -> int:
    import httpx

    body = {"model": model, "messages": row["messages"], "max_tokens": 48, "temperature": 0.0, **row.get("extra", {})}
    return httpx.post(f"{base_url}/chat/completions", json=body, timeout=300.0).status_code


def one_start(target, serve, rows: list[dict], extra: list[str]) -> tuple[float, float, list[int]]:
    from eagle3_core.serve import VLLMServer

    cfg = serve.model_copy(update={"extra_args": extra})
    with VLLMServer.for_target(target, cfg) as server:
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(rows)) as pool:
            codes = list(pool.map(lambda row: ask(server.base_url, server.model, row), rows))
        return server.startup_seconds, time.monotonic() - started, codes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=12)
    args = parser.parse_args()

    from eagle3_core.config import PipelineConfig
    from eagle3_core.serve.locate import vllm_python
    from eagle3_core.serve.one_process import computes_in_one_thread
    from eagle3_core.toy.build import TRAIN_PROMPTS, build_toy_target

    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "toy.yaml")
    toy = build_toy_target(recipe.toy)
    target = recipe.target.model_copy(update={"path": str(toy)})
    questions = [json.loads(line) for line in (toy / TRAIN_PROMPTS).open()][: args.requests - 1]
    rows = [{**q, "extra": {"tools": TOOLS}} if i % 3 == 2 else q for i, q in enumerate(questions)]
    rows.append({"messages": [{"role": "user", "content": "count " * 3000}]})  # past max_model_len: a 400
    serve = recipe.serve.model_copy(update={"log_dir": tempfile.mkdtemp(prefix="bench-vllm-start-")})
    print(f"import floor (one process's imports): {import_floor(str(vllm_python(None))):.1f} s", flush=True)
    print(f"this machine: the model in the engine's process = {computes_in_one_thread()}", flush=True)
    figures: dict[str, list[tuple[float, float]]] = {"eagle3 (one process here)": [], "vLLM mp": []}
    for r in range(args.rounds):
        order = [("eagle3 (one process here)", []), ("vLLM mp", MP)]
        for name, extra in order if r % 2 == 0 else order[::-1]:
            start_s, answer_s, codes = one_start(target, serve, rows, extra)
            figures[name].append((start_s, answer_s))
            print(
                f"round {r + 1} {name}: start {start_s:.1f} s, {len(rows)} requests {answer_s:.2f} s, "
                f"HTTP {sorted(set(codes))}",
                flush=True,
            )
    for name, runs in figures.items():
        print(
            f"{name}: start median {statistics.median(s for s, _ in runs):.1f} s, "
            f"requests median {statistics.median(a for _, a in runs):.2f} s"
        )


if __name__ == "__main__":
    main()
