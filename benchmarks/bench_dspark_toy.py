"""DSpark on the toy, set up as benchmarks/drafter-kinds.md (EAGLE-3, DFlash).

160 of the toy's train prompts (greedy answers, draft vocab 40, hidden/ from layers 1, 2, 3), 100
steps of 2048-token micro-batches, lr 3e-3, then the offline loop at temperature 0, k = 3, on 16
held-out prompts. vLLM 0.32 cannot serve DSpark on the CPU (its V2 GPU runner only), so there is no
vLLM column here: tests/drafter/test_dspark_vllm.py asserts its refusal and loads the export into
vLLM's own model class instead. Peak RSS is the trainer process's (the largest child).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_dspark_toy.py --seeds 0 1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

K, PROMPTS, MAX_TOKENS = 3, 16, 96


def target_config():
    from eagle3_core.target.config import TargetConfig
    from eagle3_core.toy.build import build_toy_target
    from eagle3_core.toy.config import ToyTargetConfig
    from tests.fixtures.toy import toy_recipe

    path = build_toy_target(ToyTargetConfig.model_validate(toy_recipe()["toy"]))
    return TargetConfig.model_validate({**toy_recipe()["target"], "path": str(path)})


def train_one(root: Path, seed: int, layers: int) -> dict:
    """One run in this process (a child of main, so its trainer's RSS is ours to read)."""
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.stages.evaluate.heldout import load_heldout
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.stage import run_train
    from tests.drafter.test_variants_vllm import offline_length

    target = target_config()
    cfg = TrainConfig(
        kind="dspark",
        dspark={"noise_token_id": 1, "block_size": K, "num_hidden_layers": layers, "markov_rank": 16},
        max_steps=100, micro_batch_tokens=2048, lr=3e-3, warmup_steps=10, checkpoint_every=100, seed=seed, report_to=[],
    )  # fmt: skip
    out = root / f"dspark-seed{seed}-l{layers}"
    start = time.perf_counter()
    run_train(cfg, target, root / "hidden", root / "vocab", out)
    train_s = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    card = (out / "export" / "README.md").read_text()
    prompts, _ = load_heldout(PromptSource(input=str(Path(target.path) / "prompts_heldout.jsonl"), max_samples=PROMPTS))
    return {
        "kind": f"dspark (block {K}, {layers} layers)", "seed": seed,
        "offline_acceptance": round(offline_length(target, out / "export", prompts), 3),
        "heldout_sim": _card_value(card, "heldout_sim_acceptance_length"),
        "tokens_per_s_median": statistics.median(speeds) if speeds else None,
        "train_s": round(train_s, 1), "peak_rss_mib": round(rss),
    }  # fmt: skip


def _card_value(card: str, key: str) -> str | None:
    line = next((ln for ln in card.splitlines() if ln.startswith(f"| {key} |")), None)
    return line.split("|")[2].strip() if line else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="/tmp/eagle3-bench-dspark")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # tiny models on 2 shared cores: one thread is ~30x faster
    root = Path(args.root)
    if args.one is not None:
        print("ROW " + json.dumps(train_one(root, args.one, args.layers)), flush=True)
        return
    if not (root / "hidden").exists():
        from tests.stages.evaluate.trained import prepare_data

        prepare_data(target_config(), root, prompts=160)
    rows = []
    for seed in args.seeds:
        cmd = [sys.executable, __file__, "--root", str(root), "--layers", str(args.layers), "--one", str(seed)]
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        row = next((ln[4:] for ln in out.stdout.splitlines() if ln.startswith("ROW ")), None)
        rows.append(json.loads(row) if row else {"seed": seed, "error": out.stderr[-2000:]})
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
