"""Train and score the toy target: a tiny ``LlamaForCausalLM`` on the arithmetic corpus, on CPU.

Loss is on the assistant part only (reasoning, ``</think>``, answer, ``<|im_end|>``); the
prompt, which ends with ``<think>``, is masked out. Mixed precision (bf16 autocast, fp32
weights) is 1.5x faster on CPUs that compute bf16 natively (17,000 vs 11,500 tokens/s) and the
target is served in bf16 there anyway; where a CPU has no bf16 kernels (AVX2 only), a bf16 matmul ran
at 0.85 GFLOPS against fp32's 110, so there training stays in fp32 (``cpu_computes_bf16``).
AdamW with linear warm-up and a cosine decay to a tenth of the peak: the cosine schedule was what took every toy size tried
to 100% held-out within 5 minutes. The step count, not the wall clock, ends
training, so a build is a pure function of its recipe (and of whether the CPU computes bf16,
which the report records).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from eagle3_core.run.progress import NullReporter, Reporter
from eagle3_core.target.hardware import cpu_computes_bf16
from eagle3_core.toy.config import ToyTargetConfig
from eagle3_core.toy.corpus import Question, parse_answer
from eagle3_core.toy.countdown import CountdownSplit, training_batch
from eagle3_core.toy.tokenizer import IM_END, PAD, THINK_CLOSE

IGNORE = -100


@dataclass(frozen=True)
class Example:
    ids: list[int]
    prompt_len: int


def completion_text(q: Question) -> str:
    """What the target writes after the generation prompt (which already ends with ``<think>``)."""
    return q.reasoning() + THINK_CLOSE + q.answer() + IM_END


def prompt_text(tokenizer, q: Question) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": q.text}], tokenize=False, add_generation_prompt=True
    )


def encode(tokenizer, questions: list, completions: list[str] | None = None) -> list[Example]:
    """Prompt + completion ids (``completions``, else each question's whole answer), batch-encoded.
    The template is rendered once around a sentinel:
    the question sits between special tokens and ``<think>`` is an added token, all hard
    boundaries, so encoding the pieces apart gives the ids of encoding them together."""
    sentinel = "\x00"
    before, after = (
        prompt_text(tokenizer, Question("add", 0, 0)).replace(Question("add", 0, 0).text, sentinel).split(sentinel)
    )
    prompts = tokenizer([before + q.text + after for q in questions], add_special_tokens=False)["input_ids"]
    texts = completions if completions is not None else [completion_text(q) for q in questions]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [Example(p + c, len(p)) for p, c in zip(prompts, ids)]


def build_model(cfg: ToyTargetConfig, tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(cfg.seed)
    eos = [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.eos_token_id]
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config)


def _batch(examples: list[Example], pad_id: int):
    """Right-padded (B, T) ids and labels; prompt and padding labels are ignored. Causal
    attention never lets a real token see the padding after it, so no mask is needed."""
    import torch

    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for row, e in enumerate(examples):
        ids[row, : len(e.ids)] = torch.tensor(e.ids)
        labels[row, e.prompt_len : len(e.ids)] = torch.tensor(e.ids[e.prompt_len :])
    return ids, labels


def _lr_at(step: int, cfg: ToyTargetConfig) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.train_steps - cfg.warmup_steps)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


Batches = Callable[[int], list[Example]]


def arithmetic_batches(tokenizer, train_pools: dict[str, list[Question]], cfg: ToyTargetConfig) -> Batches:
    """``batch_size`` examples a step, kinds equally likely (multiplication's small pool repeats)."""
    pools = {kind: encode(tokenizer, questions) for kind, questions in train_pools.items()}
    kinds, rng = list(pools), random.Random(cfg.seed)  # the pools' order: a build stays what it was
    return lambda step: [rng.choice(pools[rng.choice(kinds)]) for _ in range(cfg.batch_size)]


def countdown_batches(tokenizer, split: CountdownSplit, cfg: ToyTargetConfig) -> Batches:
    """Short countdowns at ``batch_size`` first, then long ones at ``countdown.long_batch_size``
    for the last ``countdown.long_fraction`` of the steps, a short step every
    ``countdown.short_every`` among them."""
    world, rng = cfg.countdown, random.Random(cfg.seed)
    long_from = cfg.train_steps - round(cfg.train_steps * world.long_fraction)

    def is_long(step: int) -> bool:
        if step < long_from:
            return False
        return not world.short_every or (step - long_from + 1) % world.short_every != 0

    def batch(step: int) -> list[Example]:
        long = is_long(step)
        size = world.long_batch_size if long else cfg.batch_size
        samples = training_batch(split, world, long, size, rng)
        texts = [completion_text(s.question) if s.lines is None else s.question.opening(s.lines) for s in samples]
        return encode(tokenizer, [s.question for s in samples], texts)

    return batch


def train(model, tokenizer, batches: Batches, cfg: ToyTargetConfig, reporter: Reporter | None = None) -> dict:
    """Train in place on ``batches(step)``; returns figures (steps, seconds, tokens/s, final loss)."""
    import torch

    reporter = reporter or NullReporter()
    autocast = cfg.bf16_autocast and cpu_computes_bf16()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.01)
    model.train()
    start, tokens, losses = time.monotonic(), 0, []
    for step in range(cfg.train_steps):
        batch = batches(step)
        ids, labels = _batch(batch, tokenizer.pad_token_id)
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, cfg)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += sum(len(e.ids) for e in batch)
        losses.append(loss.item())
        if step % 20 == 0 or step == cfg.train_steps - 1:
            reporter.progress("toy", step + 1, cfg.train_steps, loss=round(losses[-1], 4))
    seconds = time.monotonic() - start
    tail = losses[-20:]
    return {
        "steps": cfg.train_steps,
        "train_seconds": round(seconds, 1),
        "tokens_per_second": round(tokens / seconds),
        "final_loss": round(sum(tail) / len(tail), 4),
        "bf16_autocast": autocast,
    }


def greedy_completions(model, tokenizer, questions: list, max_new_tokens: int) -> list[str]:
    """Greedy completions (special tokens dropped, think tokens kept), batched by prompt length."""
    import torch

    prompts = [tokenizer.encode(prompt_text(tokenizer, q), add_special_tokens=False) for q in questions]
    out: list[str] = [""] * len(questions)
    model.eval()
    threads = torch.get_num_threads()
    # Decoding runs tiny matmuls: one thread is as fast alone and far faster on a shared box,
    # where two spinning OpenMP threads made it ~10x slower (cProfile: 16 s of 22 in linear).
    torch.set_num_threads(1)
    try:
        _decode_groups(model, tokenizer, prompts, out, max_new_tokens)
    finally:
        torch.set_num_threads(threads)
    return out


def _decode_groups(model, tokenizer, prompts: list[list[int]], out: list[str], max_new_tokens: int) -> None:
    import torch

    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    with torch.no_grad():
        for length, rows in by_len.items():
            ids = torch.tensor([prompts[i] for i in rows])
            gen = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
                pad_token_id=tokenizer.pad_token_id,
            )
            for row, seq in zip(rows, gen[:, length:].tolist()):
                out[row] = tokenizer.decode(seq, skip_special_tokens=True)


def score(model, tokenizer, questions: list) -> dict:
    """Held-out accuracy: the answer after ``</think>`` is right (overall and per kind), and the
    whole completion is exactly the reference."""
    longest = max(len(tokenizer.encode(completion_text(q), add_special_tokens=False)) for q in questions)
    texts = greedy_completions(model, tokenizer, questions, max_new_tokens=longest + 8)
    right = [parse_answer(t.partition(THINK_CLOSE)[2]) == q.value for q, t in zip(questions, texts)]
    exact = [t == q.reasoning() + THINK_CLOSE + q.answer() for q, t in zip(questions, texts)]
    kinds = sorted({q.kind for q in questions})
    per_op = {kind: _mean([r for r, q in zip(right, questions) if q.kind == kind]) for kind in kinds}
    return {
        "questions": len(questions),
        "answer_accuracy": _mean(right),
        "per_op": per_op,
        "exact_completion": _mean(exact),
    }


def score_forced(model, tokenizer, questions: list, batch_size: int = 4) -> dict:
    """Held-out accuracy of greedy decoding from one forward pass a question: greedy decoding
    writes the reference exactly when, fed the reference, the model's top token at every
    completion position is the reference's next one, so ``exact_completion`` is greedy's. A
    chain that errs and still ends on the right number is not counted: ``answer_accuracy`` is
    the whole completion exact, a lower bound. Decoding 8K-token traces on CPU takes tens of
    minutes (a growing KV cache, token by token); this takes seconds."""
    exact = [not wrong for wrong in forced_errors(model, tokenizer, questions, batch_size)]
    kinds = sorted({q.kind for q in questions})
    return {
        "questions": len(questions),
        "answer_accuracy": _mean(exact),
        "per_op": {kind: _mean([r for r, q in zip(exact, questions) if q.kind == kind]) for kind in kinds},
        "exact_completion": _mean(exact),
        "method": "teacher-forced greedy (whole completion exact)",
    }


def forced_errors(model, tokenizer, questions: list, batch_size: int = 4) -> list[list[tuple[int, int, int]]]:
    """Per question, fed its reference once: ``(position, wanted id, top id)`` wherever the
    model's top token is not the reference's next one (position in the encoded question)."""
    import torch

    examples = encode(tokenizer, questions)
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].ids))
    errors: list[list[tuple[int, int, int]]] = [[] for _ in examples]
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            ids, labels = _batch([examples[i] for i in rows], tokenizer.pad_token_id)
            predicted, wanted = model(input_ids=ids).logits[:, :-1].argmax(-1), labels[:, 1:]
            wrong = (predicted != wanted) & (wanted != IGNORE)
            for b, at in wrong.nonzero().tolist():
                errors[rows[b]].append((at, int(wanted[b, at]), int(predicted[b, at])))
    return errors


def _mean(flags: list[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0
