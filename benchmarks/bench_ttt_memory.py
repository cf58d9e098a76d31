"""Peak memory and time of one training step against sequence length T (TTT attention, K steps).

Each T runs in its own process, so its peak resident set (CPU) or peak allocated memory (CUDA)
is that step's alone: build the drafter, then one step of the trainer's own forward
(``loop.forward_batch``: unroll + TTT loss) + backward + AdamW on one random T-token sample.
The DeepSpeed engine is left out: it adds a constant (optimizer state), not a term in T.

    .venv/bin/python benchmarks/bench_ttt_memory.py                              # CPU, toy width, K = 7
    .venv/bin/python benchmarks/bench_ttt_memory.py --tokens 2048 4096 --impl dense   # the old T×T path
    python3 benchmarks/bench_ttt_memory.py --device cuda --preset llama-8b --tokens 8192 16384 32768
    .venv/bin/python benchmarks/bench_ttt_memory.py --account llama-8b           # bytes kept per token

``--account PRESET`` measures, at full width on the CPU, what autograd keeps per token and per
step (saved tensors at T = 16 and 48, their difference / 32): the input of the projection in
benchmarks/train.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Drafter shapes: the toy recipe's, and the real targets' (configs/*.yaml, train.drafter).
PRESETS = {
    "toy": dict(hidden=128, intermediate=512, heads=4, kv_heads=2, head_dim=32, vocab=384, draft_vocab=40),
    "llama-8b": dict(
        hidden=4096, intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256, draft_vocab=32000
    ),
    "kimi-k2.5": dict(
        hidden=7168, intermediate=18432, heads=64, kv_heads=8, head_dim=128, vocab=163840, draft_vocab=32000
    ),
}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--preset", default="toy", choices=sorted(PRESETS))
    p.add_argument("--tokens", type=int, nargs="+", default=[2048, 8192, 16384, 32768])
    p.add_argument("--ttt", type=int, default=7)
    p.add_argument("--impl", default="linear", choices=["linear", "dense"], help="dense = the test reference")
    p.add_argument(
        "--recompute", action="store_true", help="train.recompute_ttt_steps: recompute each step in backward"
    )
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--account", default=None, choices=sorted(PRESETS))
    p.add_argument("--json", type=Path, default=None, help="write the rows here too")
    return p.parse_args()


def build(preset: str, device, dtype):
    import torch

    from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter
    from eagle3_core.stages.train.loss import TargetHead

    s = PRESETS[preset]
    c = DrafterConfig(
        hidden_size=s["hidden"],
        intermediate_size=s["intermediate"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        head_dim=s["head_dim"],
        vocab_size=s["vocab"],
        draft_vocab_size=s["draft_vocab"],
        target_hidden_size=s["hidden"],
        aux_layer_ids=[2, 16, 29],
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Eagle3Drafter(c).to(dtype)
        head = TargetHead(torch.randn(s["vocab"], s["hidden"], dtype=dtype) * 0.02, model.d2t, model.t2d)
    return model, head


def batch(preset: str, T: int, device, dtype) -> dict:
    import torch

    s = PRESETS[preset]
    g = torch.Generator().manual_seed(1)
    return {
        "input_ids": torch.randint(0, s["vocab"], (1, T), generator=g).to(device),
        "aux": torch.randn(1, T, 3, s["hidden"], generator=g).to(device, dtype),
        "final": torch.randn(1, T, s["hidden"], generator=g).to(device, dtype),
        "loss_mask": torch.ones(1, T, dtype=torch.bool, device=device),
    }


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def use_dense_attention() -> None:
    """The tests' dense reference in place of the fast TTT attention (the memory it saves)."""
    import eagle3_core.drafter.model as model_module

    sys.path.insert(0, str(ROOT / "tests" / "drafter"))
    from dense_reference import dense_ttt_attention

    model_module.ttt_attention = dense_ttt_attention


def child(args) -> dict:
    import torch

    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.loop import forward_batch

    if args.impl == "dense":
        use_dense_attention()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    cuda = device.type == "cuda"
    model, head = build(args.preset, device, dtype)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    data = batch(args.preset, args.child, device, dtype)
    cfg = TrainConfig(ttt_steps=args.ttt, recompute_ttt_steps=args.recompute)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.max_memory_allocated() / 2**20 if cuda else rss_mib()
    start = time.perf_counter()
    loss, _ = forward_batch(model, head, data, cfg)
    loss.backward()
    opt.step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else rss_mib()
    settings = {"T": args.child, "impl": args.impl, "recompute": args.recompute, "preset": args.preset}
    return settings | {
        "device": str(device),
        "ttt": args.ttt,
        "threads": torch.get_num_threads(),
        "step_s": round(seconds, 2),
        "base_mib": round(base),
        "peak_mib": round(peak),
        "step_mib": round(peak - base),
        "loss": round(float(loss), 4),
    }


def saved_bytes(preset: str, T: int, steps: int, recompute: bool) -> int:
    """Bytes autograd keeps for backward after the forward of one T-token sample (full width, bf16)."""
    import torch

    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.loop import forward_batch

    model, head = build(preset, "cpu", torch.bfloat16)
    seen: dict[int, int] = {}

    def keep(t):
        if t.device.type != "meta":
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        loss, _ = forward_batch(
            model,
            head,
            batch(preset, T, "cpu", torch.bfloat16),
            TrainConfig(ttt_steps=steps, recompute_ttt_steps=recompute),
        )
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    del loss
    return sum(n for ptr, n in seen.items() if ptr not in params)


def account(args) -> dict:
    a, b = (saved_bytes(args.account, T, args.ttt, args.recompute) for T in (16, 48))
    per_token = (b - a) / 32
    return {
        "preset": args.account,
        "ttt": args.ttt,
        "recompute": args.recompute,
        "saved_bytes_per_token": round(per_token),
        "saved_bytes_per_token_per_step": round(per_token / args.ttt),
        "constant_bytes": round(a - 16 * per_token),
    }


def main() -> None:
    args = parse()
    if args.child is not None:
        print(json.dumps(child(args)), flush=True)
        return
    if args.account:
        print(json.dumps(account(args)), flush=True)
        return
    rows = []
    for T in args.tokens:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            str(T),
            "--device",
            args.device,
            "--preset",
            args.preset,
            "--ttt",
            str(args.ttt),
            "--impl",
            args.impl,
        ] + (["--recompute"] if args.recompute else [])
        # A fixed mmap threshold: freed blocks go back to the OS, so peak RSS is the step's real peak
        # (glibc's dynamic threshold otherwise keeps freed 16 MiB score blocks in the heap).
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            rows.append({"T": T, "impl": args.impl, "error": (out.stderr.strip().splitlines() or ["?"])[-1]})
        else:
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
