"""Drafter variants side by side where reasoning is long: the long toy, acceptance by context length.

    flock /tmp/eagle3-slow.lock .venv/bin/python benchmarks/bench_long_variants.py --out /tmp/long-variants \\
        --seeds 0 1 [--variants eagle3 eagle3.1 two-layers] [--steps 60] [--eval-prompts 8]

The long-reasoning toy (configs/toy-long.yaml: 2K-8K tokens of reasoning an answer) goes once
through generate, reconstruct, vocab and extract (the target served by real vLLM); then, per
seed, each variant trains for the same steps on the same micro-batches (so on equal tokens) and
the evaluate stage measures it in real vLLM on the held-out prompts (greedy, k = 3), with
acceptance per context bucket replayed offline on vLLM's own answers (0-512, 512-2K, 2K-4K,
4K-8K) beside vLLM's counters. Prints a markdown table for benchmarks/README.md and writes
``results.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench_regeneration import (
    bucket_labels,
    bucket_means,
    built_recipe,
    mean_cell,
    read_results,
    train_figures,
    write_results,
)

ROOT = Path(__file__).resolve().parents[1]
PREP_STAGES = ["generate", "reconstruct", "vocab", "extract"]
VARIANTS = {
    "eagle3": {},
    "eagle3.1": {"preset": "eagle3.1"},
    "two-layers": {"num_hidden_layers": 2},
    "norm-before-fc": {"norm_before_fc": True},
}


def main() -> None:
    args = parse_args()
    from flows.cli.demo import OFFLINE

    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread a process on these shared cores
    out = Path(args.out)
    base = built_recipe("toy-long.yaml", args.samples, args.eval_prompts)
    results = read_results(out) | {"settings": vars(args)}
    started = time.time()
    data = prepare(base, out / "data")
    results["data"] = {"prep_s": round(time.time() - started, 1), **data}
    for seed in args.seeds:  # seed-major: a run cut short still has every variant at its first seed
        for name in args.variants:
            key = f"{name}-s{seed}"
            results.setdefault("runs", {})[key] = train_and_measure(base, out / "data", name, seed, args.steps)
            write_results(out, results)
    print(markdown(results))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="Benchmark directory (a rerun reuses finished stages).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["eagle3", "eagle3.1", "two-layers"])
    parser.add_argument("--steps", type=int, default=60, help="Optimizer steps of every drafter.")
    parser.add_argument("--samples", type=int, default=48, help="Training prompts (the recipe's 48).")
    parser.add_argument("--eval-prompts", type=int, default=8, help="Held-out prompts measured in vLLM.")
    return parser.parse_args()


def prepare(base, run_dir: Path) -> dict:
    """generations/ .. hidden/ through the pipeline flow, once for every variant and seed."""
    from eagle3_core.manifest import read_manifest
    from flows.pipeline import pipeline

    pipeline(base.model_copy(update={"out": str(run_dir), "stages": PREP_STAGES, "toy": None}))
    gen, seq = read_manifest(run_dir / "generations"), read_manifest(run_dir / "sequences")
    return {
        "accepted": gen.counts.get("accepted"),
        "rejected": gen.details.get("reject_reasons"),
        "sequences": seq.counts,
    }


def train_and_measure(base, run_dir: Path, name: str, seed: int, steps: int) -> dict:
    """One drafter of variant ``name`` (``steps`` steps from ``seed``), measured in vLLM and by bucket."""
    from eagle3_core.evaluate.stage import run_evaluate
    from eagle3_core.train.config import DrafterVariant
    from eagle3_core.train.stage import run_train

    variant = DrafterVariant.model_validate(VARIANTS[name])
    train = base.train.model_copy(update={"seed": seed, "max_steps": steps, "variant": variant})
    drafter, eval_dir = run_dir / f"drafter-{name}-s{seed}", run_dir / f"eval-{name}-s{seed}"
    started = time.time()
    run_train(train, base.target, str(run_dir / "hidden"), str(run_dir / "vocab"), str(drafter))
    trained = time.time()
    run_evaluate(
        base.evaluate, base.target, str(drafter / "export"), str(eval_dir), base.serve, str(run_dir / "generations")
    )
    report = json.loads((eval_dir / "report.json").read_text())
    online, by_context = report["online"]["with_drafter"], report["by_context"]
    return {
        "vllm": online["acceptance_length"],
        "replayed": by_context["total"]["acceptance_length"],
        "buckets": {b["label"]: b["acceptance_length"] for b in by_context["buckets"] if b["drafts"]},
        "train": train_figures(drafter),
        "train_s": round(trained - started, 1),
        "evaluate_s": round(time.time() - trained, 1),
    }


def markdown(results: dict) -> str:
    runs = results.get("runs", {})
    labels = bucket_labels(list(runs.values()))
    lines = [
        "| variant | seeds | vLLM (mean ± spread) | replayed offline | " + " | ".join(labels) + " |",
        "|---|---|---|---|" + "---|" * len(labels),
    ]
    for name in VARIANTS:
        mine = [r for key, r in runs.items() if key.rsplit("-s", 1)[0] == name]
        if not mine:
            continue
        vllm = [r["vllm"] for r in mine]
        spread = (max(vllm) - min(vllm)) / 2 if len(vllm) > 1 else 0.0
        cells = bucket_means(mine, labels)
        lines.append(
            f"| {name} | {len(mine)} | {statistics.mean(vllm):.3f} ± {spread:.3f} | "
            f"{mean_cell([r['replayed'] for r in mine])} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
