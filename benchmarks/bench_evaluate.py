"""What the offline evaluation loop costs: chain speculative decoding vs plain greedy decoding.

    python benchmarks/bench_evaluate.py                                   # CPU, tiny random Llama
    python benchmarks/bench_evaluate.py --preset llama-8b --device cuda   # GPU (benchmarks/gpu.sh)

Both loops are batch 1 with a KV cache over the same random prompts: plain greedy (one target
forward per token) and ``ChainDecoder`` at k (a drafter step-0 pass plus k-1 chained steps,
then one target forward over k+1 positions per round). Weights are random, so the drafter is
almost never right (acceptance length ~1.0): the ratio is the loop's overhead per emitted
token, i.e. how many held-out prompts an offline evaluation can afford, not a speed-up (the
speed-up figure is vLLM's, in eval/report.json). Model building is outside the timings.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPE = ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads", "num_key_value_heads")
PRESETS = {  # the target's shape, and its vocabulary
    "tiny": dict(zip(SHAPE, (256, 8, 688, 4, 2), strict=True), vocab_size=8192),
    "llama-8b": dict(zip(SHAPE, (4096, 32, 14336, 32, 8), strict=True), vocab_size=128256),
}


def build(preset: str, device: str, dtype):
    """A random target and a random EAGLE-3 drafter for it (draft vocab 32000 or the target's)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter
    from eagle3_core.target.config import default_aux_layer_ids

    config = LlamaConfig(**PRESETS[preset], max_position_embeddings=8192, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device(device):
        target = LlamaForCausalLM(config).to(dtype).eval()
        dcfg = DrafterConfig.from_target(
            config.to_dict(), min(32000, config.vocab_size), default_aux_layer_ids(config.num_hidden_layers)
        )
        drafter = Eagle3Drafter(dcfg).to(dtype).eval()
    drafter.embed_tokens.weight.data = target.get_input_embeddings().weight.data
    return target, drafter


def plain_greedy(target, prompt: list[int], max_tokens: int) -> int:
    import torch
    from transformers import DynamicCache

    cache, ids, emitted = DynamicCache(), torch.tensor([prompt], device=target.device), 0
    arg = "cache" if "cache" in inspect.signature(target.forward).parameters else "past_key_values"
    with torch.inference_mode():
        while emitted < max_tokens:
            logits = target(ids, use_cache=True, **{arg: cache}).logits
            ids = logits[:, -1:].argmax(-1)
            emitted += 1
    return emitted


def timed(fn, device: str) -> float:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--json", default=None)
    return ap.parse_args()


def main() -> None:
    import torch

    from eagle3_core.stages.evaluate.metrics import SpecCounters
    from eagle3_core.stages.evaluate.offline import ChainDecoder

    args = parse()
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    target, drafter = build(args.preset, args.device, dtype)
    decoder = ChainDecoder(target, drafter, eos_ids=set())  # no stop token: every prompt runs full length
    g = torch.Generator().manual_seed(0)
    prompts = [
        torch.randint(0, target.config.vocab_size, (args.prompt_len,), generator=g).tolist()
        for _ in range(args.prompts)
    ]
    plain_greedy(target, prompts[0], 4)  # warm-up (kernels, allocator)
    counters = SpecCounters()
    greedy_s = timed(lambda: [plain_greedy(target, p, args.max_tokens) for p in prompts], args.device)
    chain_s = timed(lambda: [decoder.decode(p, args.k, args.max_tokens, counters) for p in prompts], args.device)
    tokens = args.prompts * args.max_tokens
    result = {
        "preset": args.preset,
        "device": args.device,
        "dtype": str(dtype).replace("torch.", ""),
        "prompts": args.prompts,
        "prompt_len": args.prompt_len,
        "max_tokens": args.max_tokens,
        "k": args.k,
        "greedy_tokens_per_s": tokens / greedy_s,
        "chain_tokens_per_s": tokens / chain_s,
        "chain_overhead": greedy_s / chain_s,
        "acceptance_length": counters.acceptance_length,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
