"""Reconstruction throughput beside the tokenizer's own batched encode of the same texts.

    .venv/bin/python benchmarks/bench_reconstruct.py [--samples 10000] [--workers 1 2]

Builds locally (nothing downloaded) a byte-level BPE of 8,000 ids trained on the synthetic
corpus, with Kimi-K2.5's special tokens and chat layout, writes ``--samples`` generation records
(20% multi-turn; reasoning ~250 words, answers ~60), then times:

- ``encode``: the tokenizer's batched encode (``tokenizer(texts)``) of each sample's full text
  (prompt, think tokens, reasoning, answer, end-of-turn) - the limit the issue names; and the
  Rust backend's ``encode_batch_fast`` alone, a stricter one (no Python lists built);
- ``reconstruct``: ``run_reconstruct`` end to end (read Parquet, render the chat template,
  encode, lay out, mask, write Parquet), once per ``--workers`` value.

Prints one table row per measurement (samples/s, tokens/s, ratio to encode).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.stages.reconstruct.families import FAMILIES, KIMI_TEMPLATE  # noqa: E402
from tests.stages.reconstruct.records import record, write_generations  # noqa: E402

WORDS = (
    "the of and to in is that it for as with was on be by this are from at or an which first then "
    "number sum add carry digit result answer check so we get because next step value equals total "
    "consider problem means let us compute again verify multiply divide plus minus times half double "
    "question user asks wants simple careful think therefore clearly"
).split()


def sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + rng.choice([".", ".\n", "?\n\n", ". "])


def paragraph(rng: random.Random, words: int) -> str:
    return "".join(sentence(rng, rng.randint(6, 18)) for _ in range(max(1, words // 12)))


def make_records(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        messages = [{"role": "user", "content": paragraph(rng, 30)}]
        if rng.random() < 0.2:
            messages += [
                {"role": "assistant", "content": " " + paragraph(rng, 40)},
                {"role": "user", "content": paragraph(rng, 20)},
            ]
        out.append(
            record(
                f"bench-{i}", messages, paragraph(rng, rng.randint(150, 350)), " " + paragraph(rng, rng.randint(30, 90))
            )
        )
    return out


def build_tokenizer(records: list[dict], out_dir: Path) -> Path:
    """A trained byte-level BPE (8,000 ids) plus Kimi's specials and chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, trainers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    family = FAMILIES["kimi_k2_5"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8000, initial_alphabet=ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((r["reasoning"] + r["content"] for r in records[:2000]), trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in family.specials])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=family.bos, eos_token=family.eos, chat_template=KIMI_TEMPLATE
    )
    fast.save_pretrained(str(out_dir))
    return out_dir


def full_texts(tokenizer, records: list[dict]) -> list[str]:
    return [
        tokenizer.apply_chat_template(r["messages"], tokenize=False, add_generation_prompt=True)
        + r["reasoning"]
        + "</think>"
        + r["content"]
        + "<|im_end|>"
        for r in records
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    from eagle3_core.target.tokenizer import load_tokenizer

    root = Path(tempfile.mkdtemp(prefix="bench-reconstruct-"))
    try:
        records = make_records(args.samples)
        tok_dir = build_tokenizer(records, root / "tokenizer")
        gen = write_generations(root / "gen", records)
        tokenizer = load_tokenizer(tok_dir)
        tokens, encode_s = encode_limits(tokenizer, full_texts(tokenizer, records), args.samples)
        for workers in args.workers:
            seconds = time_reconstruct(tok_dir, gen, root / f"seq-{workers}", workers, args.samples, tokens)
            print(
                f"| reconstruct (end to end) | {workers} | {seconds:.2f} | {args.samples / seconds:,.0f} | "
                f"{tokens / seconds:,.0f} | {encode_s / seconds:.2f} |"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def encode_limits(tokenizer, texts: list[str], samples: int) -> tuple[int, float]:
    """The table's head and the two encode limits; (tokens, the batched encode's seconds)."""
    started = time.perf_counter()
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    encode_s = time.perf_counter() - started
    tokens = sum(map(len, encoded))
    print(f"{samples} samples, {tokens} tokens ({tokens / samples:.0f}/sample)")
    print("| what | workers | seconds | samples/s | tokens/s | vs encode |")
    print("|---|---|---|---|---|---|")
    print(
        f"| tokenizer batched encode (limit) | - | {encode_s:.2f} | {samples / encode_s:,.0f} | "
        f"{tokens / encode_s:,.0f} | 1.00 |"
    )
    started = time.perf_counter()
    tokenizer.backend_tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    raw_s = time.perf_counter() - started
    print(
        f"| Rust `encode_batch_fast` (no Python lists) | - | {raw_s:.2f} | {samples / raw_s:,.0f} | "
        f"{tokens / raw_s:,.0f} | {encode_s / raw_s:.2f} |"
    )
    return tokens, encode_s


def time_reconstruct(tok_dir: Path, gen: Path, out: Path, workers: int, samples: int, tokens: int) -> float:
    """Seconds of one whole reconstruct run, checked to have made every sequence."""
    from eagle3_core.stages.reconstruct.config import ReconstructConfig
    from eagle3_core.stages.reconstruct.stage import run_reconstruct
    from eagle3_core.target.config import TargetConfig

    target = TargetConfig(path=str(tok_dir), family="kimi_k2_5", end_of_turn="<|im_end|>")
    started = time.perf_counter()
    manifest = run_reconstruct(
        ReconstructConfig(workers=workers, shard_rows=1000, max_length=100_000), target, gen, out
    )
    seconds = time.perf_counter() - started
    assert manifest.counts["sequences"] == samples, manifest.counts
    assert manifest.counts["tokens"] == tokens, (manifest.counts["tokens"], tokens)
    return seconds


if __name__ == "__main__":
    main()
