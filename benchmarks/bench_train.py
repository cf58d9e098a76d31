"""Training tokens/s: the DeepSpeed engine (ZeRO-2, as `eagle3 train` runs it) beside a bare PyTorch loop.

Same drafter, same batches, same TTT unroll and loss, same AdamW + clipping; the two loops run
in alternating rounds so a noisy neighbour slows both alike. Prints one JSON line per round and
a summary with DeepSpeed's overhead (1 - ds/bare).

    .venv/bin/python benchmarks/bench_train.py                       # CPU (gloo), fp32
    .venv/bin/python benchmarks/bench_train.py --device cuda --hidden 4096 --vocab 32000 --tokens 8192

Synthetic batches (random target states) exercise exactly the compute of real ones.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4096, help="target vocab (draft vocab is half)")
    p.add_argument("--tokens", type=int, default=1024, help="tokens per micro-batch")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--ttt", type=int, default=7)
    p.add_argument("--steps", type=int, default=8, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--zero", type=int, default=2)
    return p.parse_args()


def build(args, torch):
    from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter
    from eagle3_core.stages.train.loss import TargetHead

    H = args.hidden
    c = DrafterConfig(
        hidden_size=H,
        intermediate_size=4 * H,
        num_attention_heads=args.heads,
        num_key_value_heads=max(1, args.heads // 2),
        head_dim=H // args.heads,
        vocab_size=args.vocab,
        draft_vocab_size=args.vocab // 2,
        target_hidden_size=H,
        aux_layer_ids=[2, 4, 6],
    )
    torch.manual_seed(0)
    model = Eagle3Drafter(c)
    head = TargetHead(torch.randn(args.vocab, H) * 0.05, model.d2t.clone(), model.t2d.clone())
    return model, head


def batches(args, torch, n: int, dtype, device):
    g = torch.Generator().manual_seed(1)
    B, T, H = max(1, args.tokens // args.seq), args.seq, args.hidden
    out = []
    for _ in range(n):
        out.append(
            {
                "input_ids": torch.randint(0, args.vocab, (B, T), generator=g).to(device),
                "aux": torch.randn(B, T, 3, H, generator=g).to(device, dtype),
                "final": torch.randn(B, T, H, generator=g).to(device, dtype),
                "loss_mask": torch.ones(B, T, dtype=torch.bool, device=device),
            }
        )
    return out


def timed(step, data, sync) -> float:
    step(data[0])  # warm-up step outside the clock
    sync()
    start = time.perf_counter()
    for b in data:
        step(b)
    sync()
    return time.perf_counter() - start


def main() -> None:
    args = parse()
    _single_rank(args.device)
    import deepspeed
    import torch

    from eagle3_core.stages.train.config import TrainConfig

    device = torch.device(args.device)
    bf16 = device.type == "cuda"
    dtype = torch.bfloat16 if bf16 else torch.float32
    deepspeed.init_distributed(dist_backend="nccl" if bf16 else "gloo")
    cfg = TrainConfig(ttt_steps=args.ttt, zero_stage=args.zero, warmup_steps=2)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    ds_step, bare_step = _steps(args, cfg, device, dtype)

    data = batches(args, torch, args.steps, dtype, device)
    tokens = sum(int(b["loss_mask"].sum()) for b in data)
    results = {"deepspeed": [], "bare": []}
    for r in range(args.rounds):
        for name, step in (
            (("deepspeed", ds_step), ("bare", bare_step))
            if r % 2 == 0
            else (("bare", bare_step), ("deepspeed", ds_step))
        ):
            rate = tokens / timed(step, data, sync)
            results[name].append(rate)
            print(json.dumps({"round": r, "loop": name, "tokens_per_s": round(rate, 1)}), flush=True)
    print(json.dumps(_summary(args, device, tokens // len(data), results)))


def _single_rank(device: str) -> None:
    """The environment of a one-rank DeepSpeed run, unless the launcher set it."""
    from eagle3_core.ports import free_port

    os.environ.setdefault("DS_ACCELERATOR", "cuda" if device.startswith("cuda") else "cpu")
    for k, v in (
        ("RANK", "0"),
        ("LOCAL_RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", str(free_port())),
    ):
        os.environ.setdefault(k, v)


def _steps(args, cfg, device, dtype):
    """One optimizer step through DeepSpeed, and the same step in a bare PyTorch loop."""
    import deepspeed
    import torch

    from eagle3_core.stages.train.ds_config import deepspeed_config
    from eagle3_core.stages.train.loop import forward_batch

    ds_model, head = build(args, torch)
    engine, _, _, _ = deepspeed.initialize(
        model=ds_model.to(device),
        config=deepspeed_config(cfg, 10**6, device.type == "cuda"),
        model_parameters=[p for p in ds_model.parameters() if p.requires_grad],
    )
    bare, _ = build(args, torch)
    bare = bare.to(device, dtype)
    head = type(head)(
        head.weight.to(device), head.draft_ids.new_zeros(len(head.draft_ids)).to(device), head.t2d.to(device)
    )
    opt = torch.optim.AdamW([p for p in bare.parameters() if p.requires_grad], lr=cfg.lr, betas=(0.9, 0.95))

    def ds_step(b):
        loss, _ = forward_batch(engine.module, head, b, cfg)
        engine.backward(loss)
        engine.step()

    def bare_step(b):
        loss, _ = forward_batch(bare, head, b, cfg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(bare.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return ds_step, bare_step


def _summary(args, device, tokens_per_batch: int, results: dict[str, list[float]]) -> dict:
    import torch

    ds, bare_rate = statistics.median(results["deepspeed"]), statistics.median(results["bare"])
    return {
        "summary": True,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "hidden": args.hidden,
        "tokens_per_batch": tokens_per_batch,
        "ttt": args.ttt,
        "zero_stage": args.zero,
        "deepspeed_tokens_per_s": round(ds, 1),
        "bare_tokens_per_s": round(bare_rate, 1),
        "overhead": round(1 - ds / bare_rate, 4),
    }


if __name__ == "__main__":
    main()
