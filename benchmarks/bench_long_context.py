"""Long-context training and extraction on one GPU, in one table (benchmarks/gpu.sh, issue 24).

At each T (default 2K, 8K, 16K, 32K tokens, one sample a step) on an 8B-shaped drafter (H = 4096,
32 heads, 8 KV heads, MLP 14336, 128K target / 32K draft vocab, bf16, random weights, K = 7):
one trainer step (``loop.forward_batch``: unroll + TTT loss, backward, AdamW) through each TTT
attention (``drafter/attention_kernels.py``): the blocked form, ``flex_attention`` compiled, and
SDPA with a dense mask, where each can run: peak allocated memory, step time, tokens/s. Then the
extract stage's transformers engine on an 8B-shaped target (32 layers) against a bare forward
over the same T-token samples: tokens/s of each.

Every measurement runs in its own process (a clean peak, an out-of-memory kept to its row) under
``--child-timeout``; once ``--budget`` seconds are spent the rest are listed as not run, so the
whole fits the 8 minutes gpu.sh gives it.

    python3 benchmarks/bench_long_context.py --device cuda                  # the GPU run (gpu.sh)
    .venv/bin/python benchmarks/bench_long_context.py --dry-run             # CPU, tiny shapes, T = 64, 128
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

IMPLS = ("blocked", "flex", "sdpa")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tokens", type=int, nargs="+", default=[2048, 8192, 16384, 32768])
    p.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    p.add_argument("--ttt", type=int, default=7)
    p.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up step (compiles flex)")
    p.add_argument("--extract-tokens", type=int, default=65536, help="tokens per extraction measurement")
    p.add_argument("--child-timeout", type=float, default=120.0)
    p.add_argument("--budget", type=float, default=420.0, help="seconds; later measurements are not started")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes, T = 64 and 128: the script's own check")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.dry_run:
        args.device, args.tokens, args.extract_tokens = "cpu", [64, 128], 512
    args.drafter_preset, args.target_preset = ("toy", "tiny") if args.dry_run else ("llama-8b", "llama-8b")
    return args


def train_row(args, impl: str, T: int) -> dict:
    """One trainer step at T through ``impl``: peak memory, step time, tokens/s."""
    import bench_ttt_memory as ttt
    import torch

    from eagle3_core.drafter.attention_kernels import ttt_attention_for
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.loop import forward_batch

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    model, head = ttt.build(args.drafter_preset, device, dtype)
    model.attend = ttt_attention_for(
        impl, compiled=cuda
    )  # as train.ttt_attention sets it; flex is linear only compiled
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    data, cfg = ttt.batch(args.drafter_preset, T, device, dtype), TrainConfig(ttt_steps=args.ttt)

    def step() -> None:
        loss, _ = forward_batch(model, head, data, cfg)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up: kernels, the allocator, flex's compile
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.steps
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else ttt.rss_mib() / 1024
    return {"T": T, "what": f"train step, {impl} attention", "peak_gib": round(peak, 2), "step_s": round(seconds, 3)}


def extract_rows(args) -> list[dict]:
    """The extract stage's engine against a bare forward, at each T (one target, built once)."""
    import bench_extract as ex
    import torch

    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import plan_extract
    from eagle3_core.states.engines.hf_engine import TransformersEngine
    from eagle3_core.target.config import TargetConfig
    from tests.stages.extract.helpers import write_sequences

    shape, rows = ex.PRESETS[args.target_preset], []
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = ex.build_target(work / "target", shape, dtype, args.device)
        for T in args.tokens:
            n = max(1, args.extract_tokens // T)
            write_sequences(work / f"seq-{T}", [[T] * n], vocab=shape["vocab"], seed=T)
            cfg = ExtractConfig(max_tokens_per_batch=max(T, 16384), shard_tokens=max(T, 32768), device=args.device)
            plan = plan_extract(cfg, TargetConfig(path=str(work / "target")), work / f"seq-{T}", work / f"h-{T}")
            engine = TransformersEngine(model, plan.layers, args.device, cfg.max_tokens_per_batch)
            engine.forward([[1] * 16])  # warm-up
            bare = min(ex.bare_pass(engine, plan) for _ in range(2))
            extract = min(ex.extract_pass(engine, plan, work / f"h-{T}") for _ in range(2))
            target = f"{shape['layers']}-layer H={shape['hidden']} target"
            rows.append({"T": T, "what": f"bare forward, {target}", "step_s": round(bare / n, 3)})
            rows.append({"T": T, "what": f"extract stage engine, {target}", "step_s": round(extract / n, 3)})
    return rows


def run_child(args, name: str) -> list[dict]:
    """``name`` (``train:IMPL:T`` or ``extract``) in its own process: its rows, or one row saying why not."""
    cmd = [sys.executable, __file__, "--child", name, "--device", args.device, "--tokens", *map(str, args.tokens)]
    cmd += ["--ttt", str(args.ttt), "--steps", str(args.steps), "--extract-tokens", str(args.extract_tokens)]
    cmd += ["--dry-run"] if args.dry_run else []
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_timeout)
    except subprocess.TimeoutExpired:
        return [failed_row(name, f"over {args.child_timeout:.0f} s")]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode == 0 and lines:
        return [json.loads(line) for line in lines]
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return [failed_row(name, "out of memory" if "out of memory" in done.stderr.lower() else tail[:90])]


def failed_row(name: str, why: str) -> dict:
    parts = name.split(":")
    what = f"train step, {parts[1]} attention" if parts[0] == "train" else "extraction"
    return {"T": int(parts[2]) if parts[0] == "train" else None, "what": what, "note": why}


def child(args) -> None:
    kind, *rest = args.child.split(":")
    rows = [train_row(args, rest[0], int(rest[1]))] if kind == "train" else extract_rows(args)
    for row in rows:
        print(json.dumps(row), flush=True)


def table(rows: list[dict], device: str) -> str:
    lines = [
        f"| T (tokens) | measurement ({device}) | peak memory (GiB) | step time (s) | tokens/s | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.get("T") or 0, r["what"])):
        rate = round(r["T"] / r["step_s"]) if r.get("step_s") and r.get("T") else "-"
        lines.append(
            f"| {r.get('T') or '-'} | {r['what']} | {r.get('peak_gib', '-')} | {r.get('step_s', '-')} | {rate} | "
            f"{r.get('note', '')} |"
        )
    return "\n".join(lines)


def main() -> None:
    args = parse()
    if args.child:
        child(args)
        return
    started, rows = time.monotonic(), []
    jobs = [f"train:{impl}:{T}" for T in args.tokens for impl in args.impls] + ["extract"]
    for name in jobs:
        if time.monotonic() - started > args.budget:
            rows.append(failed_row(name, f"not run: the {args.budget:.0f}-s budget was spent"))
            continue
        rows += run_child(args, name)
    print(table(rows, args.device + (" (dry run: tiny shapes)" if args.dry_run else "")), flush=True)
    print(f"wall {time.monotonic() - started:.0f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
