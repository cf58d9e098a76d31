"""Where a built long toy goes wrong: every completion position whose top token is not the reference's.

    .venv/bin/python benchmarks/long_toy_errors.py [--recipe configs/toy-long.yaml] [--dir BUILD]

Feeds each held-out trace once (``toy.train.forced_errors``, what ``score_forced`` counts) and prints, per wrong position, the
trace, its step count, the position, the text before it and the token wanted and the one the
target would write; then the count by part of the trace (first line, the lines between, the
answer). A build's exact share says whether it is worth drafting; this says what to change.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default=str(ROOT / "configs" / "toy-long.yaml"))
    parser.add_argument("--dir", default=None, help="A build's directory (default: the recipe's cached build).")
    args = parser.parse_args()

    import yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eagle3_core.toy.build import _world, toy_target_dir
    from eagle3_core.toy.config import ToyTargetConfig
    from eagle3_core.toy.train import encode, forced_errors

    cfg = ToyTargetConfig.model_validate(yaml.safe_load(open(args.recipe, encoding="utf-8"))["toy"])
    built = Path(args.dir) if args.dir else toy_target_dir(cfg)
    tok, model = AutoTokenizer.from_pretrained(str(built)), AutoModelForCausalLM.from_pretrained(str(built))
    heldout = _world(cfg).heldout
    parts: Counter[str] = Counter()
    for i, (example, errors) in enumerate(zip(encode(tok, heldout), forced_errors(model, tok, heldout))):
        for at, want, got in errors:
            before = tok.decode(example.ids[max(0, at - 20) : at + 1])
            parts[part_of(before)] += 1
            print(
                i,
                heldout[i].times,
                at,
                repr(before[-60:]),
                "want",
                repr(tok.decode([want])),
                "got",
                repr(tok.decode([got])),
            )
    print(f"wrong tokens by part of the trace over {len(heldout)} traces: {dict(parts)}")


def part_of(before: str) -> str:
    if "</think>" in before.rsplit("\n", 1)[-1]:
        return "answer"
    return "first lines" if "<think>" in before else "between"


if __name__ == "__main__":
    main()
