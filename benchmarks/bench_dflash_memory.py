"""Peak memory and time of one DFlash (or DSpark) training step (after a warm-up step) against sequence length T (block groups).

One step of the trainer's own DFlash loss (``train/kind_dflash.forward``: context features, the
blocks in groups under activation checkpointing, soft cross-entropy per slot) + backward + AdamW
on one random T-token sample, at an 8B-shaped drafter width; the counterpart of
``bench_ttt_memory.py`` for EAGLE-3's unroll. No pydantic needed (the GPU machine has none).

    .venv/bin/python benchmarks/bench_dflash_memory.py --dry-run                # CPU, tiny shapes
    python3 benchmarks/bench_dflash_memory.py --device cuda --kind dspark --block 15   # DSpark: + Markov head, k = block
    python3 benchmarks/bench_dflash_memory.py --device cuda --tokens 2048 8192 16384 32768
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LLAMA_8B = dict(hidden=4096, intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256, draft_vocab=32000)
TINY = dict(hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16, vocab=512, draft_vocab=64)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--tokens", type=int, nargs="+", default=[2048, 8192, 16384, 32768])
    p.add_argument("--block", type=int, default=16)
    p.add_argument("--anchors", type=int, default=512)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--kind", choices=["dflash", "dspark"], default="dflash")
    p.add_argument("--markov-rank", type=int, default=256, help="DSpark's Markov rank (the published drafts' 256)")
    p.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU: a check of the script")
    p.add_argument("--json", default=None)
    return p.parse_args()


def one_step(shape: dict, T: int, args, device, dtype) -> dict:
    import torch

    from eagle3_core.drafter.dflash import DFlashConfig, DFlashDrafter
    from eagle3_core.drafter.dspark import DSparkConfig, DSparkDrafter
    from eagle3_core.stages.train.kind_dflash import forward as dflash_forward
    from eagle3_core.stages.train.kind_dspark import forward as dspark_forward
    from eagle3_core.stages.train.loss import TargetHead

    c = DFlashConfig(
        hidden_size=shape["hidden"], intermediate_size=shape["intermediate"], num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"], head_dim=shape["head_dim"], vocab_size=shape["vocab"],
        draft_vocab_size=shape["draft_vocab"], target_hidden_size=shape["hidden"], aux_layer_ids=[2, 16, 29],
        block_size=args.block, mask_token_id=0, num_hidden_layers=args.layers,
    )  # fmt: skip
    section = SimpleNamespace(anchors_per_row=args.anchors, loss_decay_gamma=7.0, ce_weight=0.1, tv_weight=0.9)
    cfg = SimpleNamespace(seed=0, kind=args.kind, **{args.kind: section})
    if args.kind == "dspark":
        c = DSparkConfig(**vars(c), markov_rank=args.markov_rank)
    forward = dspark_forward if args.kind == "dspark" else dflash_forward
    model = (DSparkDrafter if args.kind == "dspark" else DFlashDrafter)(c).to(device, dtype)
    head = TargetHead(torch.randn(c.vocab_size, c.hidden_size, device=device, dtype=dtype) * 0.02, model.d2t, model.t2d)
    head.t2d[:] = True
    batch = {
        "input_ids": torch.randint(0, c.vocab_size, (1, T), device=device),
        "aux": torch.randn(1, T, 3, c.hidden_size, device=device, dtype=dtype),
        "final": torch.randn(1, T, c.hidden_size, device=device, dtype=dtype),
        "loss_mask": torch.ones(1, T, dtype=torch.bool, device=device),
        "segments": torch.ones(1, T, dtype=torch.long, device=device),
    }
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)

    def step():
        loss, counts = forward(model, head, batch, cfg)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach(), counts

    step()  # warm-up: kernels chosen, AdamW's states allocated (the timed step is a steady one)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if device.type == "cuda" else 0
    start = time.perf_counter()
    loss, counts = step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else 0
    return {
        "kind": args.kind, "tokens": T, "block": args.block, "anchors": args.anchors, "layers": args.layers,
        "step_s": round(seconds, 3), "tokens_per_s": round(T / seconds), "peak_gib": round(peak / 2**30, 2), "above_weights_gib": round((peak - base) / 2**30, 2),
        "loss": round(float(loss), 4), "counted": counts.count[:3],
    }  # fmt: skip


def main() -> None:
    import torch

    args = parse()
    device = torch.device(args.device)
    shape, dtype = (TINY, torch.float32) if args.dry_run else (LLAMA_8B, torch.bfloat16)
    tokens = [256, 512] if args.dry_run else args.tokens
    rows = []
    for T in tokens:
        try:
            rows.append(one_step(shape, T, args, device, dtype))
        except torch.OutOfMemoryError as exc:
            rows.append({"tokens": T, "error": f"out of memory: {str(exc)[:120]}"})
        print(json.dumps(rows[-1]), flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
