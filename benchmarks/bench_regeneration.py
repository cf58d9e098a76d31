"""Why regenerating pays: drafters trained on a dataset's answers vs on the target's own, in real vLLM.

    flock /tmp/eagle3-slow.lock .venv/bin/python benchmarks/bench_regeneration.py --out /tmp/regen \\
        --seeds 0 1 [--arms dataset regenerated no-reasoning dataset-reasoned] [--finetune]

The toy target (configs/toy.yaml, or ``--recipe toy-long.yaml``) and its training prompts, one
drafter recipe, several training sets:

- ``dataset``: the toy's dataset answers (``dataset_answers.jsonl``: the right result in another
  wording, no reasoning), taken with ``generate.source: dataset``;
- ``dataset-reasoned``: the same with a short reasoning in another style (``reasoning_content``);
- ``regenerated``: the target's own answers from real vLLM, reasoning included (the recipe's path);
- ``no-reasoning``: those same answers with the reasoning dropped (a ``source: dataset`` input
  written from them).

Each set goes through the pipeline flow (generate, reconstruct, vocab, extract; only
``regenerated`` serves the target); then, per seed, one drafter trains for the same number of
steps (``--steps``, micro-batches of the recipe's ``micro_batch_tokens``, packed) and the evaluate
stage measures it in real vLLM on the held-out prompts while the target reasons (greedy, k = 3).
``--finetune`` also trains from ``dataset``'s first drafter (``train.init_from``) on the
regenerated set and reads from its metrics the held-out simulated acceptance at each step.
Prints a markdown table for benchmarks/regeneration.md and writes ``results.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREP_STAGES = ["generate", "reconstruct", "vocab", "extract"]
ARMS = ("dataset", "dataset-reasoned", "regenerated", "no-reasoning")


def main() -> None:
    args = parse_args()
    from flows.cli.demo import OFFLINE

    for key, value in OFFLINE.items():  # the demo's environment: no hub, no telemetry
        os.environ.setdefault(key, value)
    # one thread per process: 2-thread torch ran ~30x slower on this shared box (benchmarks/train.md)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = Path(args.out)
    base = toy_config(args)
    results = read_results(out) | {"settings": vars(args)}
    suffix = f"-{args.tag}" if args.tag else ""
    for arm in ordered(args.arms):
        started = time.time()
        run_dir = prepare(arm, base, out)
        results["arms"][arm + suffix] = {
            "prep_s": round(time.time() - started, 1),
            "steps": args.steps,
            "data": data_figures(run_dir),
            "seeds": {},
        }
    for seed in args.seeds:  # seed-major: a run cut short still has every arm at its first seed
        for arm in ordered(args.arms):
            figures = train_and_measure(base, out / arm, seed, args.steps, name=f"s{seed}{suffix}")
            results["arms"][arm + suffix]["seeds"][str(seed)] = figures
            write_results(out, results)
    if args.finetune:
        results["finetune"] = finetune(base, out, args.seeds[0], args.steps)
        write_results(out, results)
    print(markdown(results))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="Benchmark directory (a rerun reuses finished stages).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument(
        "--recipe",
        default="toy.yaml",
        help="A toy recipe in configs/ (toy-long.yaml: 2K-8K tokens of reasoning; pass its --samples 48 --micro-batch-tokens 8192).",
    )
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=["dataset", "regenerated", "no-reasoning"])
    parser.add_argument("--steps", type=int, default=120, help="Optimizer steps of every drafter.")
    parser.add_argument("--samples", type=int, default=1000, help="Training prompts (the recipe's 1,000).")
    parser.add_argument("--micro-batch-tokens", type=int, default=2048, help="Tokens per step (packed), every arm.")
    parser.add_argument("--eval-prompts", type=int, default=50, help="Held-out prompts measured in vLLM.")
    parser.add_argument(
        "--tag",
        default="",
        help="Suffix of this invocation's arms and drafters (say, for other --steps): `same-tokens` -> dataset-same-tokens.",
    )
    parser.add_argument("--finetune", action="store_true", help="Also fine-tune dataset's drafter on regenerated.")
    return parser.parse_args()


def ordered(arms: list[str]) -> list[str]:
    """``regenerated`` first: ``no-reasoning`` is written from its answers."""
    return sorted(arms, key=lambda a: (a != "regenerated", ARMS.index(a)))


def toy_config(args: argparse.Namespace):
    """The toy recipe with the toy built, its paths filled in, and the benchmark's sizes."""
    return built_recipe(args.recipe, args.samples, args.eval_prompts, {"micro_batch_tokens": args.micro_batch_tokens})


def built_recipe(name: str, samples: int, eval_prompts: int, train: dict | None = None):
    """configs/<name> with its toy built and its paths filled in, ``samples`` training prompts,
    ``eval_prompts`` held-out ones measured in vLLM only (the offline loop and the no-drafter
    baseline measure nothing the benchmarks compare)."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.toy.build import build_toy_target
    from flows.pipeline import with_toy_paths

    config = PipelineConfig.from_yaml(ROOT / "configs" / name)
    config = with_toy_paths(config, str(build_toy_target(config.toy)))
    prompts = config.generate.prompts.model_copy(update={"max_samples": samples})
    held = config.evaluate.prompts.model_copy(update={"max_samples": eval_prompts})
    return config.model_copy(
        update={
            "generate": config.generate.model_copy(update={"prompts": prompts}),
            "train": config.train.model_copy(update=train or {}),
            "evaluate": config.evaluate.model_copy(update={"prompts": held, "offline": False, "baseline": False}),
        }
    )


def prepare(arm: str, base, out: Path) -> Path:
    """The arm's generations/ .. hidden/ through the pipeline flow; returns its run directory."""
    from flows.pipeline import pipeline

    run_dir = out / arm
    config = base.model_copy(update={"out": str(run_dir), "stages": PREP_STAGES, "toy": None})
    if arm != "regenerated":
        config = config.model_copy(update={"serve": None, "generate": dataset_generate(arm, base, out)})
    pipeline(config)
    return run_dir


def dataset_generate(arm: str, base, out: Path):
    """``generate.source: dataset`` over the arm's answers, for the same prompts in the same order."""
    from eagle3_core.toy.dataset_answers import ensure_dataset_answers

    toy_dir = Path(base.target.path)
    if arm == "no-reasoning":
        source = write_without_reasoning(out / "regenerated" / "generations", out / "no-reasoning-input.jsonl")
    else:
        source = ensure_dataset_answers(toy_dir)["plain" if arm == "dataset" else "reasoned"]
    prompts = base.generate.prompts.model_copy(update={"input": str(source)})
    return base.generate.model_copy(
        update={"source": "dataset", "prompts": prompts, "require_reasoning": arm == "dataset-reasoned"}
    )


def write_without_reasoning(generations: Path, path: Path) -> Path:
    """The target's accepted answers as dataset rows whose final turn keeps the answer only."""
    import polars as pl

    from eagle3_core.contracts.generations import accepted_parts, sent_messages

    records = [r for part in accepted_parts(generations) for r in pl.read_parquet(part).iter_rows(named=True)]
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            turns = sent_messages(record["messages"]) + [{"role": "assistant", "content": record["content"]}]
            fh.write(json.dumps({"messages": turns}, ensure_ascii=False) + "\n")
    return path


def data_figures(run_dir: Path) -> dict:
    """What the arm trains on: rows, tokens and supervised tokens (sequences/), reject reasons."""
    from eagle3_core.run.manifest import read_manifest

    gen, seq = read_manifest(run_dir / "generations"), read_manifest(run_dir / "sequences")
    return {
        "accepted": gen.counts.get("accepted"),
        "rejected": gen.details.get("reject_reasons"),
        "reasoning_sources": gen.details.get("reasoning_sources"),
        "sequences": seq.counts,
    }


def train_and_measure(base, run_dir: Path, seed: int, steps: int, init_from: str | None = None, name: str = "") -> dict:
    """One drafter (``steps`` steps from ``seed``) trained on the arm's hidden/, measured in vLLM."""
    from eagle3_core.stages.evaluate.stage import run_evaluate
    from eagle3_core.stages.train.stage import run_train

    tag = name or f"s{seed}"
    train = base.train.model_copy(update={"seed": seed, "max_steps": steps, "init_from": init_from})
    started = time.time()
    drafter = run_dir / f"drafter-{tag}"
    run_train(train, base.target, str(run_dir / "hidden"), str(run_dir / "vocab"), str(drafter))
    trained = time.time()
    eval_dir = run_dir / f"eval-{tag}"
    run_evaluate(
        base.evaluate, base.target, str(drafter / "export"), str(eval_dir), base.serve, str(run_dir / "generations")
    )
    from eagle3_core.contracts.evaluation import EvaluationReport

    report = EvaluationReport.read(eval_dir / "report.json")  # the stage's contract, not key paths
    online, buckets = report.online.with_drafter, report.by_context.buckets if report.by_context else []
    return {
        "acceptance_length": online.acceptance_length,
        "acceptance_per_position": online.acceptance_per_position,
        "drafts": online.drafts,
        "buckets": {b.label: b.acceptance_length for b in buckets if b.drafts},
        "train": train_figures(drafter),
        "train_s": round(trained - started, 1),
        "evaluate_s": round(time.time() - trained, 1),
    }


def train_figures(drafter: Path) -> dict:
    """Steps, tokens seen and the simulated held-out acceptance, from the trainer's own records."""
    lines = [json.loads(line) for line in (drafter / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [m for m in lines if m.get("split", "train") == "train" and "loss" in m]
    held = [m for m in lines if m.get("split") == "heldout"]
    return {
        "steps": len(steps),
        "tokens": sum(m.get("tokens", 0) for m in steps),
        "supervised": sum(m.get("positions", 0) for m in steps),
        "final_loss": steps[-1]["loss"] if steps else None,
        "heldout_sim": [(m.get("step"), m["sim_acceptance_length"]) for m in held],
    }


def finetune(base, out: Path, seed: int, steps: int) -> dict:
    """From ``dataset``'s drafter, the same steps on the regenerated set: when it passes its start."""
    start = out / "dataset" / f"drafter-s{seed}"
    tuned = base.train.model_copy(update={"eval_every": 10})
    base = base.model_copy(update={"train": tuned})
    result = train_and_measure(
        base, out / "regenerated", seed, steps, init_from=str(start), name=f"from-dataset-s{seed}"
    )
    curve = result["train"]["heldout_sim"]
    first = curve[0][1] if curve else None
    result["passes_start_at_step"] = next((s for s, v in curve[1:] if first is not None and v > first), None)
    return result


def read_results(out: Path) -> dict:
    """What an earlier invocation into ``out`` measured (another arm's figures stay beside these)."""
    path = out / "results.json"
    return json.loads(path.read_text()) if path.is_file() else {"arms": {}}


def write_results(out: Path, results: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))


def markdown(results: dict) -> str:
    labels = bucket_labels([r for figures in results["arms"].values() for r in figures["seeds"].values()])
    lines = [
        "| trained on | seeds | acceptance length k=3 (mean ± spread) | per seed | per position (mean) | sequences | supervised tokens | "
        + " | ".join(labels)
        + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(labels),
    ]
    for arm, figures in results["arms"].items():
        runs = list(figures["seeds"].values())
        lengths = [r["acceptance_length"] for r in runs]
        spread = (max(lengths) - min(lengths)) / 2 if len(lengths) > 1 else 0.0
        per_pos = [round(statistics.mean(p), 3) for p in zip(*(r["acceptance_per_position"] for r in runs))]
        seq = figures["data"]["sequences"]
        lines.append(
            f"| {arm} | {len(runs)} | {statistics.mean(lengths):.3f} ± {spread:.3f} | "
            f"{', '.join(f'{v:.3f}' for v in lengths)} | {per_pos} | {seq.get('sequences')} | "
            f"{seq.get('supervised_tokens', '-')} | " + " | ".join(bucket_means(runs, labels)) + " |"
        )
    if "finetune" in results:
        tuned = results["finetune"]
        lines += [
            "",
            f"fine-tuned from dataset's drafter on the regenerated set: acceptance length "
            f"{tuned['acceptance_length']:.3f} after {tuned['train']['steps']} steps; held-out simulated "
            f"acceptance by step {tuned['train']['heldout_sim']}; passes its start at step "
            f"{tuned['passes_start_at_step']}",
        ]
    return "\n".join(lines)


def bucket_labels(runs: list[dict]) -> list[str]:
    """The context buckets any run measured, in order (none for runs measured before buckets)."""
    return sorted({label for r in runs for label in r.get("buckets", {})}, key=_bucket_order)


def bucket_means(runs: list[dict], labels: list[str]) -> list[str]:
    """Per bucket, the runs' mean acceptance length ('-' where none measured it)."""
    return [mean_cell([r.get("buckets", {}).get(label) for r in runs]) for label in labels]


def mean_cell(values: list, digits: int = 3) -> str:
    kept = [v for v in values if v is not None]
    return f"{statistics.mean(kept):,.{digits}f}" if kept else "-"


def _bucket_order(label: str) -> int:
    start = label.split("-")[0].rstrip("+")
    return int(start[:-1]) * 1024 if start.endswith("K") else int(start)


if __name__ == "__main__":
    main()
