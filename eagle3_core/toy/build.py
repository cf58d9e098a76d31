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
from collections.abc import Iterator
from pathlib import Path

from eagle3_core.base import stable_hash
from eagle3_core.fsio import write_json_atomic
from eagle3_core.manifest import runtime_versions
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.toy.config import ToyTargetConfig
from eagle3_core.toy.corpus import OPS, Question, distinct_training_prompts, split_questions
from eagle3_core.toy.dataset_answers import ensure_dataset_answers

# Bump when the code changes what a recipe builds (corpus wording, tokenizer, training loop).
BUILD_VERSION = 2  # 2: no newline before </think> (vLLM's parser strips it from the reasoning)
REPORT_NAME = "toy_report.json"
TRAIN_PROMPTS, HELDOUT_PROMPTS = "prompts_train.jsonl", "prompts_heldout.jsonl"


def cache_root(cfg: ToyTargetConfig) -> Path:
    """``cfg.cache_dir``, else ``$EAGLE3_CACHE``, else ``~/.cache/eagle3``."""
    root = cfg.cache_dir or os.environ.get("EAGLE3_CACHE") or Path.home() / ".cache" / "eagle3"
    return Path(root).expanduser()


def recipe_hash(cfg: ToyTargetConfig) -> str:
    return stable_hash({"build_version": BUILD_VERSION, "recipe": cfg.recipe()})


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
        reporter.log(f"building the toy target (recipe {final.name}, 2.5-6 minutes on 2 CPU cores) -> {final}")
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


def _build_into(cfg: ToyTargetConfig, out: Path, reporter: Reporter) -> None:
    import torch

    from eagle3_core.toy import train as toy_train

    started = time.monotonic()
    out.mkdir(parents=True)
    split = split_questions(cfg.heldout_questions, cfg.seed)
    tokenizer = _tokenizer(cfg, split, out)
    model = toy_train.build_model(cfg, tokenizer)
    figures = toy_train.train(model, tokenizer, split, cfg, reporter)
    heldout = toy_train.score(model, tokenizer, split.heldout)
    # vLLM serves it in bf16: score that too, so a precision-fragile build shows in the report.
    heldout_bf16 = toy_train.score(copy.deepcopy(model).to(torch.bfloat16), tokenizer, split.heldout)
    reporter.log(
        f"toy target: held-out answer accuracy {heldout['answer_accuracy']:.1%} "
        f"after {figures['train_seconds']:.0f} s of training"
    )
    _save_model(model, tokenizer, out)
    _write_prompts(
        out / TRAIN_PROMPTS, distinct_training_prompts(split, cfg.train_prompts, random.Random(cfg.seed + 1))
    )
    _write_prompts(out / HELDOUT_PROMPTS, split.heldout)
    report = {
        "recipe_hash": recipe_hash(cfg),
        "build_version": BUILD_VERSION,
        "recipe": cfg.recipe(),
        "vocab_size": len(tokenizer),
        "parameters": sum(p.numel() for p in model.parameters()),
        "heldout": heldout,
        "heldout_bf16": heldout_bf16,
        "training": figures,
        "build_seconds": round(time.monotonic() - started, 1),
        "torch_threads": torch.get_num_threads(),
        "versions": runtime_versions("torch", "transformers", "tokenizers"),
    }
    write_json_atomic(out / REPORT_NAME, report)


def _tokenizer(cfg: ToyTargetConfig, split, out: Path):
    """A BPE tokenizer trained on the training questions and answers, saved into ``out``."""
    from transformers import AutoTokenizer

    from eagle3_core.toy import train as toy_train
    from eagle3_core.toy.tokenizer import save_tokenizer, train_tokenizer

    pool = [q for op in OPS for q in split.train[op]]
    # Role names repeat so they merge into single tokens, as in a real chat vocabulary.
    texts = [q.text for q in pool] + [toy_train.completion_text(q) for q in pool] + ["user", "assistant", "system"] * 10
    save_tokenizer(train_tokenizer(texts, cfg.vocab_size), out, cfg.max_position_embeddings)
    return AutoTokenizer.from_pretrained(str(out))


def _save_model(model, tokenizer, out: Path) -> None:
    from transformers import GenerationConfig

    model.save_pretrained(str(out))
    GenerationConfig(eos_token_id=model.config.eos_token_id, pad_token_id=tokenizer.pad_token_id).save_pretrained(
        str(out)
    )


def _write_prompts(path: Path, questions: list[Question]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for q in questions:
            fh.write(json.dumps({"messages": [{"role": "user", "content": q.text}]}, ensure_ascii=False) + "\n")


def read_report(path: str | Path) -> dict:
    """The build report of a toy target directory."""
    return json.loads((Path(path) / REPORT_NAME).read_text(encoding="utf-8"))
