"""Build (or load from cache) the toy reasoning target: a Hugging Face model directory.

Layout of ``<cache>/toy/<recipe hash>/``::

    config.json  generation_config.json  model.safetensors      a tiny LlamaForCausalLM (fp32)
    tokenizer.json  tokenizer_config.json  chat_template.jinja   K2.5-layout fast tokenizer
    prompts_train.jsonl    training-pool prompts for the generate stage (`messages` rows)
    prompts_heldout.jsonl  held-out prompts, never trained on (`messages` rows)
    dataset_answers*.jsonl the training prompts answered as public datasets answer (dataset_answers.py)
    toy_report.json        recipe, held-out accuracy, training figures; written last

Guarantees: the directory appears complete or not at all (built in a temporary sibling, then
renamed); concurrent builders wait on a file lock and the second finds the first's result; a
recipe change (or a ``BUILD_VERSION`` bump) gives a new hash and a new build, the same recipe
never retrains. Cost: about 2.5 minutes on 2 idle CPU cores (6 on this shared VM), 5 MB on disk.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from eagle3_core.base import stable_hash
from eagle3_core.run.fsio import write_json_atomic
from eagle3_core.run.manifest import runtime_versions
from eagle3_core.run.progress import NullReporter, Reporter
from eagle3_core.target.hardware import cpu_computes_bf16
from eagle3_core.toy.config import ToyTargetConfig
from eagle3_core.toy.corpus import OPS, distinct_training_prompts, split_questions
from eagle3_core.toy.countdown import split_countdowns
from eagle3_core.toy.dataset_answers import ensure_dataset_answers

# Bump when the code changes what a recipe builds (corpus wording, tokenizer, training loop).
BUILD_VERSION = 2  # 2: no newline before </think> (vLLM's parser strips it from the reasoning)
REPORT_NAME = "toy_report.json"
TRAIN_PROMPTS, HELDOUT_PROMPTS = "prompts_train.jsonl", "prompts_heldout.jsonl"


def cache_root(cfg: ToyTargetConfig) -> Path:
    """``cfg.cache_dir``, else ``$EAGLE3_CACHE``, else ``~/.cache/eagle3``."""
    from eagle3_core.run.fsio import cache_root as machine_cache

    return Path(cfg.cache_dir).expanduser() if cfg.cache_dir else machine_cache()


# The long world's own version, hashed only into its recipes (the toy's hash stays as it was).
COUNTDOWN_VERSION = 6  # 2: borrows reaching the thousands oversampled; 3: ones digit first; 4: everywhere; 5: the answer as a line begins; 6: the start state first


def recipe_hash(cfg: ToyTargetConfig) -> str:
    versions = {"build_version": BUILD_VERSION} | ({"countdown_version": COUNTDOWN_VERSION} if cfg.countdown else {})
    return stable_hash({**versions, "recipe": cfg.recipe()})


def toy_target_dir(cfg: ToyTargetConfig) -> Path:
    return cache_root(cfg) / "toy" / recipe_hash(cfg)


def is_built(path: Path) -> bool:
    return (path / REPORT_NAME).is_file()


def build_toy_target(cfg: ToyTargetConfig, reporter: Reporter | None = None) -> Path:
    """The toy target's directory, built first when no build of this recipe is cached."""
    reporter = reporter or NullReporter()
    final = toy_target_dir(cfg)
    if not is_built(final):
        _build_once(cfg, final, reporter)
    ensure_dataset_answers(final)  # outside the recipe hash: a cached build gains them without retraining
    return final


def _build_once(cfg: ToyTargetConfig, final: Path, reporter: Reporter) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    with _locked(final.with_name(final.name + ".lock")):
        if is_built(final):  # another process built it while we waited
            return
        cost = "2.5-6 minutes" if cfg.countdown is None else "15-40 minutes, the long-reasoning toy"
        reporter.log(f"building the toy target (recipe {final.name}, {cost} on 2 CPU cores) -> {final}")
        tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _build_into(cfg, tmp, reporter)
            if not is_built(final):  # a copy placed there meanwhile (by hand) wins; readers never see a swap
                shutil.rmtree(final, ignore_errors=True)  # a leftover without a report is incomplete
                os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class World:
    """What a build trains on and exports, whichever world the recipe picks."""

    texts: list[str]  # the tokenizer's training corpus
    heldout: list  # questions never trained on: scored, and exported for evaluation
    prompts: list  # the generate stage's training prompts
    batches: Callable  # tokenizer -> Batches


def _world(cfg: ToyTargetConfig) -> World:
    from eagle3_core.toy import train as toy_train

    if cfg.countdown is not None:
        split = split_countdowns(cfg.countdown, cfg.heldout_questions, cfg.train_prompts, cfg.seed)
        return World(
            texts=_corpus_texts(split.prompts[:200]),
            heldout=split.heldout,
            prompts=split.prompts,
            batches=lambda tokenizer: toy_train.countdown_batches(tokenizer, split, cfg),
        )
    split = split_questions(cfg.heldout_questions, cfg.seed)
    return World(
        texts=_corpus_texts([q for op in OPS for q in split.train[op]]),
        heldout=split.heldout,
        prompts=distinct_training_prompts(split, cfg.train_prompts, random.Random(cfg.seed + 1)),
        batches=lambda tokenizer: toy_train.arithmetic_batches(tokenizer, split.train, cfg),
    )


def _corpus_texts(questions: list) -> list[str]:
    from eagle3_core.toy.train import completion_text

    # Role names repeat so they merge into single tokens, as in a real chat vocabulary.
    return [q.text for q in questions] + [completion_text(q) for q in questions] + ["user", "assistant", "system"] * 10


def _build_into(cfg: ToyTargetConfig, out: Path, reporter: Reporter) -> None:
    import torch

    from eagle3_core.toy import train as toy_train

    started = time.monotonic()
    out.mkdir(parents=True)
    world = _world(cfg)
    tokenizer = _tokenizer(cfg, world.texts, out)
    model = toy_train.build_model(cfg, tokenizer)
    figures = toy_train.train(model, tokenizer, world.batches(tokenizer), cfg, reporter)
    scores = _score(model, tokenizer, world.heldout, cfg)
    reporter.log(
        f"toy target: held-out answer accuracy {scores['heldout']['answer_accuracy']:.1%} "
        f"after {figures['train_seconds']:.0f} s of training"
    )
    _save_model(model, tokenizer, out)
    _write_prompts(out / TRAIN_PROMPTS, world.prompts)
    _write_prompts(out / HELDOUT_PROMPTS, world.heldout)
    report = {
        "recipe_hash": recipe_hash(cfg),
        "build_version": BUILD_VERSION,
        "recipe": cfg.recipe(),
        "vocab_size": len(tokenizer),
        "parameters": sum(p.numel() for p in model.parameters()),
        **scores,
        "training": figures,
        "build_seconds": round(time.monotonic() - started, 1),
        "torch_threads": torch.get_num_threads(),
        "versions": runtime_versions("torch", "transformers", "tokenizers"),
    }
    write_json_atomic(out / REPORT_NAME, report)


def _tokenizer(cfg: ToyTargetConfig, texts: list[str], out: Path):
    """A BPE tokenizer trained on the world's questions and answers, saved into ``out``."""
    from transformers import AutoTokenizer

    from eagle3_core.toy.tokenizer import save_tokenizer, train_tokenizer

    save_tokenizer(train_tokenizer(texts, cfg.vocab_size), out, cfg.max_position_embeddings)
    return AutoTokenizer.from_pretrained(str(out))


def _save_model(model, tokenizer, out: Path) -> None:
    from transformers import GenerationConfig

    model.save_pretrained(str(out))
    GenerationConfig(eos_token_id=model.config.eos_token_id, pad_token_id=tokenizer.pad_token_id).save_pretrained(
        str(out)
    )


def _score(model, tokenizer, heldout: list, cfg: ToyTargetConfig) -> dict:
    """Held-out scores in fp32 and in bf16, as vLLM serves it: a precision-fragile build shows
    as a gap. The long world's traces are scored from one forward pass each (``score_forced``).
    A CPU without bf16 kernels leaves bf16 unscored (None): there it would take hours."""
    import torch

    from eagle3_core.toy import train as toy_train

    score = toy_train.score if cfg.countdown is None else toy_train.score_forced
    scores = {"heldout": score(model, tokenizer, heldout), "heldout_bf16": None}
    if cpu_computes_bf16():
        scores["heldout_bf16"] = score(copy.deepcopy(model).to(torch.bfloat16), tokenizer, heldout)
    return scores


def _write_prompts(path: Path, questions: list) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for q in questions:
            fh.write(json.dumps({"messages": [{"role": "user", "content": q.text}]}, ensure_ascii=False) + "\n")


def read_report(path: str | Path) -> dict:
    """The build report of a toy target directory."""
    return json.loads((Path(path) / REPORT_NAME).read_text(encoding="utf-8"))
