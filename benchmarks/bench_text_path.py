"""How often the text path rebuilds the server's own token ids, on real vLLM, by temperature.

The toy target (configs/toy.yaml) is served by real vLLM on loopback. For each temperature the
generate stage answers the same prompts with token ids; the pre-flight check
(``eagle3 probe --recipe``) runs once against the live server; then reconstruct rebuilds every
answer from its text and compares with the server's ids (``details.server_check``). A sampled
answer need not be tokenized canonically (the model may write " 4" as " " + "4"), which the
text path cannot rebuild: the figure says how often that happens. The script also checks that
training gets the server's ids: every sequence whose record has ids is ``source: server`` and
equals the server's prompt + completion ids.

    .venv/bin/python benchmarks/bench_text_path.py [--prompts 300] [--temperatures 0 0.6 1.0]
"""

from __future__ import annotations

import argparse
import fcntl
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VLLM_LOCK = Path("/tmp/eagle3-vllm.lock")  # the machine-wide lock of tests/fixtures/vllm.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=300)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.6, 1.0])
    args = parser.parse_args()

    from eagle3_core.config import PipelineConfig
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.serve import VLLMServer
    from eagle3_core.toy.build import build_toy_target

    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "toy.yaml")
    toy = build_toy_target(recipe.toy)
    target = recipe.target.model_copy(update={"path": str(toy)})
    work = Path(tempfile.mkdtemp(prefix="bench-text-path-"))
    serve = recipe.serve.model_copy(update={"port": None, "log_dir": str(work / "vllm")})
    with open(VLLM_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with VLLMServer.for_target(target, serve) as server:
            print(f"vLLM up in {server.startup_seconds:.0f} s at {server.base_url}")
            gens = {}
            for t in args.temperatures:
                gen = recipe.generate.model_copy(
                    update={
                        "base_urls": [server.base_url],
                        "temperature": t,
                        "seed": 0,
                        "prompts": PromptSource(input=str(toy / "prompts_train.jsonl"), max_samples=args.prompts),
                    }
                )
                gens[t] = generate(gen, work / f"gen-{t}")
            preflight_line(target, gen, server.base_url)
    for t, gen_dir in gens.items():
        report(t, target, recipe, gen_dir, work / f"seq-{t}")


def generate(gen, out: Path) -> Path:
    from eagle3_core.stages.generate.stage import run_generate

    started = time.monotonic()
    manifest = run_generate(gen, out)
    print(
        f"T={gen.temperature}: {manifest.counts['accepted']} answers in {time.monotonic() - started:.0f} s "
        f"({manifest.details['probe']})"
    )
    return out


def preflight_line(target, gen, url: str) -> None:
    from eagle3_core.errors import EndpointError
    from eagle3_core.preflight.suite import preflight

    try:
        print(preflight(target, gen, url).line())
    except EndpointError as exc:
        print(f"pre-flight: {exc}")


def report(t: float, target, recipe, gen_dir: Path, seq_dir: Path) -> None:
    import polars as pl

    from eagle3_core.stages.reconstruct.stage import run_reconstruct

    manifest = run_reconstruct(recipe.reconstruct, target, gen_dir, seq_dir)
    check = manifest.details["server_check"]
    where = {}
    for m in manifest.details["mismatches"]:
        where[m["where"]] = where.get(m["where"], 0) + 1
    gens = pl.concat([pl.read_parquet(f) for f in sorted((gen_dir / "accepted").glob("part-*.parquet"))])
    seqs = pl.concat([pl.read_parquet(f) for f in sorted(seq_dir.glob("part-*.parquet"))])
    server = {
        r["sample_id"]: list(r["prompt_token_ids"]) + list(r["completion_token_ids"])
        for r in gens.iter_rows(named=True)
        if r["completion_token_ids"] is not None
    }
    trained_on_ids = sum(
        1
        for r in seqs.iter_rows(named=True)
        if r["source"] == "server" and list(r["input_ids"]) == server.get(r["sample_id"])
    )
    print(
        f"T={t}: text path matched the server's ids in {check['matched']} of {check['checked']} "
        f"({check['match_rate']:.1%}); first differences by place (first 100): {where or 'none'}; "
        f"rejects {manifest.details['reject_reasons'] or 'none'}; sequences on the server's ids: "
        f"{trained_on_ids} of {len(seqs)} (records with ids: {len(server)})"
    )
    from eagle3_core.target.tokenizer import load_tokenizer

    tok = load_tokenizer(target.path)
    for m in manifest.details["mismatches"][:3]:
        pieces = [[tok.decode([i], skip_special_tokens=False) for i in m[k]] for k in ("rebuilt_near", "server_near")]
        print(f"   e.g. at token {m['first_diff']} ({m['where']}): rebuilt {pieces[0]} vs server {pieces[1]}")


if __name__ == "__main__":
    main()
