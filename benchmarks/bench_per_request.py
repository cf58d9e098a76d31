"""What vLLM's per-request acceptance costs: the same drafter served with and without
``--per-request-spec-decode-metrics detailed``, the same prompts, A B A B.

evaluate asks for each answer's verify steps (``evaluate/per_request.py``) from the pass it already
times; the steps ride in the responses, so the only cost is vLLM's own bookkeeping and the bytes of
the answers. Each round starts the server one way, sends the prompts once untimed (warm-up) and
``--passes`` timed times, and stops it; then the other way. Output tokens/s of each timed pass, the
median per arm, and the ratio per round.

    .venv/bin/python benchmarks/bench_per_request.py --recipe configs/toy.yaml --target TOY_DIR \
        --drafter runs/demo/drafter/export [--input PROMPTS] [--prompts 16] [--max-tokens 256] [--rounds 2]

The recipe gives the target's parsers and chat settings; ``--input`` defaults to the toy's held-out
prompts beside the target (``prompts_heldout.jsonl``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def arm(target, export: Path, prompts: list, args, detailed: bool, log_dir: Path) -> list[float]:
    """One server start: a warm-up pass, then ``args.passes`` timed passes; their output tokens/s."""
    from eagle3_core.drafter.card import speculative_config
    from eagle3_core.serve import ServeConfig, VLLMServer
    from eagle3_core.stages.evaluate.online import client_config, measure

    serve = ServeConfig(log_dir=str(log_dir), max_model_len=args.max_model_len)
    flag = "detailed" if detailed else None
    spec = speculative_config(export, args.k)
    gen = client_config(0.0, args.max_tokens, args.concurrency, 600, target.chat)
    with VLLMServer.for_target(target, serve, speculative_config=spec, spec_decode_metrics=flag) as server:
        measured = measure(server.base_url, prompts, gen, repeats=args.passes, warmup=True)
    carried = sum(1 for c in measured.completions if c is not None and c.spec_decode is not None)
    print(
        f"  {'with' if detailed else 'without'} the flag: {[round(r, 1) for r in measured.rates]} tokens/s, "
        f"{carried} of {len(prompts)} answers carried their steps",
        flush=True,
    )
    return measured.rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, required=True)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument("--drafter", type=Path, required=True, help="the drafter's export folder")
    parser.add_argument("--input", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-per-request"), help="vLLM's logs")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()

    from eagle3_core.config import PipelineConfig
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.stages.evaluate.heldout import load_heldout

    target = PipelineConfig.from_yaml(args.recipe).target.model_copy(update={"path": str(args.target)})
    source = args.input or args.target / "prompts_heldout.jsonl"
    prompts, _ = load_heldout(PromptSource(input=str(source)))
    prompts = prompts[: args.prompts]
    export = args.drafter
    print(
        f"target {target.path}, drafter {export}, {len(prompts)} prompts, max tokens {args.max_tokens}, "
        f"k = {args.k}, batch {args.concurrency}",
        flush=True,
    )
    on, off, ratios = [], [], []
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", flush=True)
        a = arm(target, export, prompts, args, True, args.out)
        b = arm(target, export, prompts, args, False, args.out)
        on += a
        off += b
        ratios.append(statistics.median(a) / statistics.median(b))
    print(
        f"median output tokens/s: {statistics.median(on):.1f} with the flag, {statistics.median(off):.1f} without; "
        f"ratio per round {[round(x, 3) for x in ratios]} (1.0 = no cost; the issue's bar: within 10 %)"
    )


if __name__ == "__main__":
    main()
