"""Extraction speed against a bare forward pass, padding share, and bytes written per token.

    python benchmarks/bench_extract.py                      # CPU, tiny random Llama
    python benchmarks/bench_extract.py --preset llama-8b --device cuda --samples 64   # GPU (benchmarks/gpu.sh)
    flock /tmp/eagle3-vllm.lock python benchmarks/bench_extract.py --engine both   # + the vLLM engine

What is compared (transformers engine): the stage's own shard writer (hooks, bf16 copy to the
host, NaN check, in-place safetensors writes) against ``model.model(...)`` alone over the very
same length-bucketed batches; model loading is outside both timings. The target for the
extraction is >= 0.9 of the bare pass, and bytes written per token <= 1.02 x 4·H·2.
Each measurement is the best of ``--repeats`` interleaved runs (2 shared CPU cores are noisy).
With ``--engine both`` the vLLM engine writes the same shards through the same shard writer;
its start-up (a separate process) is reported apart. vLLM packs sequences, so it computes
no padding; the transformers bare pass stays the reference.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PRESETS = {
    "tiny": dict(hidden=256, layers=8, intermediate=688, heads=4, kv_heads=2, vocab=8192),
    "llama-8b": dict(hidden=4096, layers=32, intermediate=14336, heads=32, kv_heads=8, vocab=128256),
}


def build_target(directory: Path, shape: dict, dtype, device: str):
    """A random Llama of ``shape`` in memory, and its config.json on disk (the plan reads it)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=shape["vocab"],
        hidden_size=shape["hidden"],
        intermediate_size=shape["intermediate"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        max_position_embeddings=16384,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype).eval()
    config.save_pretrained(directory)
    return model


def write_sequences(directory: Path, samples: int, mean_len: int, vocab: int, seed: int = 0) -> int:
    """Log-normal lengths around ``mean_len`` (a realistic spread of reasoning traces)."""
    import math

    from tests.stages.extract.helpers import write_sequences as write

    rng = random.Random(seed)
    lengths = [
        max(8, min(4 * mean_len, int(rng.lognormvariate(math.log(mean_len) - 0.18, 0.6)))) for _ in range(samples)
    ]
    write(directory, [lengths], vocab=vocab, seed=seed)
    return sum(lengths)


def bare_pass(engine, plan) -> float:
    """Seconds for model.model(...) over the stage's own batches (rows loaded beforehand)."""
    import torch

    from eagle3_core.stages.extract.plan import load_shard_rows

    work = []
    for shard in plan.shards:
        rows = load_shard_rows(plan.sequences_dir, shard)
        for batch in engine.plan([len(r[1]) for r in rows]):
            work.append(engine._pad([rows[i][1] for i in batch.members]))
    _sync()
    started = time.perf_counter()
    with torch.inference_mode():
        for ids, mask in work:
            engine.model.model(input_ids=ids, attention_mask=mask, use_cache=False)
    _sync()
    return time.perf_counter() - started


def extract_pass(engine, plan, out_dir: Path) -> float:
    from eagle3_core.stages.extract.shard import write_shard

    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    started = time.perf_counter()
    for shard in plan.shards:
        write_shard(engine, plan.sequences_dir, out_dir, shard, plan.hidden_size, plan.layers)
    _sync()
    return time.perf_counter() - started


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def bench_transformers(args, work: Path, shape: dict) -> dict:
    import torch

    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.plan import load_shard_rows
    from eagle3_core.stages.extract.stage import plan_extract
    from eagle3_core.states.engines.batching import padding_share
    from eagle3_core.states.engines.hf_engine import TransformersEngine
    from eagle3_core.target.config import TargetConfig
    from eagle3_core.target.hardware import resolve_device

    device = resolve_device(args.device)
    dtype = torch.bfloat16 if device != "cpu" else torch.float32
    model = build_target(work / "target", shape, dtype, device)
    tokens = write_sequences(work / "seq", args.samples, args.mean_len, shape["vocab"])
    cfg = ExtractConfig(max_tokens_per_batch=args.max_tokens_per_batch, shard_tokens=args.shard_tokens, device=device)
    plan = plan_extract(cfg, TargetConfig(path=str(work / "target")), work / "seq", work / "hidden")  # writes nothing
    engine = TransformersEngine(model, plan.layers, device, cfg.max_tokens_per_batch)
    engine.forward([[1] * 16])  # warm-up (kernels, allocator)
    bare, extract = float("inf"), float("inf")
    for _ in range(args.repeats):  # interleaved, best of each: a neighbour's load hits both alike
        bare = min(bare, bare_pass(engine, plan))
        extract = min(extract, extract_pass(engine, plan, work / "hidden"))
    batches = [b for s in plan.shards for b in engine.plan([len(r[1]) for r in load_shard_rows(plan.sequences_dir, s)])]
    return {
        "engine": "transformers",
        "device": device,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": shape,
        "layers": plan.layers,
        "samples": args.samples,
        "tokens": tokens,
        "shards": len(plan.shards),
        "bare_tokens_per_s": round(tokens / bare),
        "extract_tokens_per_s": round(tokens / extract),
        "ratio": round(bare / extract, 3),
        "padding_share": round(padding_share(batches), 4),
    } | size_figures(work / "hidden", tokens, shape["hidden"])


def size_figures(hidden: Path, tokens: int, hidden_size: int) -> dict:
    """Bytes written per token, against the contract's state bytes per token."""
    from eagle3_core.contracts.hidden import state_bytes_per_token

    written = sum(p.stat().st_size for p in hidden.glob("shard-*.safetensors"))
    return {
        "bytes_per_token": round(written / tokens, 1),
        "state_bytes_per_token": state_bytes_per_token(hidden_size),
        "overhead": round(written / tokens / state_bytes_per_token(hidden_size) - 1, 4),
    }


def bench_vllm(args, work: Path, shape: dict, figures: dict) -> dict:
    """The vLLM engine over the same plan (same shards, same tokens); start-up reported apart."""
    import torch

    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import plan_extract
    from eagle3_core.states.engines.vllm_engine import VllmEngine
    from eagle3_core.target.config import TargetConfig

    target = work / "target"
    build_target(target, shape, torch.float32, "cpu").save_pretrained(target)  # vLLM loads from disk
    vllm = {"vllm_python": args.vllm_python, "vllm_kv_cache_bytes": args.vllm_kv_cache_bytes}
    cfg = ExtractConfig(engine="vllm", shard_tokens=args.shard_tokens, **vllm)
    plan = plan_extract(cfg, TargetConfig(path=str(target)), work / "seq", work / "hidden-vllm")
    started = time.perf_counter()
    engine = VllmEngine(
        cfg.vllm_options(),
        TargetConfig(path=str(target)),
        plan.layers,
        plan.num_hidden_layers,
        max_model_len=max(s.longest for s in plan.shards) + 1,
        workdir=work / "engine",
    )
    try:
        startup = time.perf_counter() - started
        seconds = min(extract_pass(engine, plan, work / "hidden-vllm") for _ in range(args.repeats))
    finally:
        engine.close()
    written = sum(p.stat().st_size for p in (work / "hidden-vllm").glob("shard-*.safetensors"))
    tokens = figures["tokens"]
    return {
        "engine": "vllm",
        "startup_s": round(startup, 1),
        "extract_tokens_per_s": round(tokens / seconds),
        "vs_transformers_extract": round(tokens / seconds / figures["extract_tokens_per_s"], 3),
        "bytes_per_token": round(written / tokens, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument(
        "--engine",
        choices=["transformers", "both"],
        default="transformers",
        help="both: also the vLLM engine on the same shards (CPU: hold /tmp/eagle3-vllm.lock)",
    )
    parser.add_argument("--vllm-kv-cache-bytes", type=int, default=256 << 20)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--mean-len", type=int, default=96)
    parser.add_argument("--max-tokens-per-batch", type=int, default=2048)
    parser.add_argument("--shard-tokens", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vllm-python", default=None)
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    shape = PRESETS[args.preset]
    work = Path(tempfile.mkdtemp(prefix="bench-extract-"))
    try:
        figures = bench_transformers(args, work, shape)
        if args.engine == "both":
            figures = {"transformers": figures, "vllm": bench_vllm(args, work, shape, figures)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
