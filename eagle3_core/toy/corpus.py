"""The toy target's world: two-digit arithmetic questions answered with a chain of thought.

Every answer is ``<think>`` + one operation per line of working + ``</think>`` + the answer +
``<|im_end|>``. One operation a step is what makes it learnable by a 1 M-parameter model in a
few CPU minutes (its held-out accuracy by operation: benchmarks/toy.md).

Guarantees: the question universe is enumerated, so the held-out split never overlaps the
training pool; everything is a pure function of the seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

Op = Literal["add", "sub", "mul"]
OPS: tuple[Op, ...] = ("add", "sub", "mul")
SYMBOL = {"add": "+", "sub": "-", "mul": "×"}  # × is two UTF-8 bytes: round-trips exercise bytes
TWO_DIGITS = range(10, 100)
ONE_DIGIT_FACTORS = range(2, 10)


@dataclass(frozen=True)
class Question:
    op: Op
    a: int
    b: int

    @property
    def kind(self) -> str:
        return self.op

    @property
    def text(self) -> str:
        return f"What is {self.a} {SYMBOL[self.op]} {self.b}?"

    @property
    def value(self) -> int:
        return {"add": self.a + self.b, "sub": self.a - self.b, "mul": self.a * self.b}[self.op]

    def reasoning(self) -> str:
        """The working, as written between ``<think>`` and ``</think>``: one step a line, no
        whitespace at either end (vLLM's kimi_k2 reasoning parser strips it from
        ``message.reasoning``, and the text must say exactly what the token ids say)."""
        steps = {"add": _add_steps, "sub": _sub_steps, "mul": _mul_steps}[self.op](self.a, self.b)
        return "\n".join(steps)

    def answer(self) -> str:
        """The visible answer, after ``</think>``."""
        return f"The answer is {self.value}."


def _add_steps(a: int, b: int) -> list[str]:
    (a1, a0), (b1, b0) = divmod(a, 10), divmod(b, 10)
    ones = a0 + b0
    lines = [f"Add {a} and {b} digit by digit."]
    if ones >= 10:
        lines.append(f"{a0} plus {b0} is {ones}, write {ones - 10} carry 1.")
        tens = f"{a1} plus {b1} is {a1 + b1}, plus 1 is {a1 + b1 + 1}, write {a1 + b1 + 1}."
    else:
        lines.append(f"{a0} plus {b0} is {ones}, write {ones}.")
        tens = f"{a1} plus {b1} is {a1 + b1}, write {a1 + b1}."
    return [*lines, tens, f"So {a} + {b} = {a + b}."]


def _sub_steps(a: int, b: int) -> list[str]:
    (a1, a0), (b1, b0) = divmod(a, 10), divmod(b, 10)
    lines = [f"Subtract {b} from {a} digit by digit."]
    if a0 < b0:
        lines.append(
            f"{a0} minus {b0} needs a borrow, {a0 + 10} minus {b0} is {a0 + 10 - b0}, write {a0 + 10 - b0} borrow 1."
        )
        tens = f"{a1} minus 1 is {a1 - 1}, minus {b1} is {a1 - 1 - b1}, write {a1 - 1 - b1}."
    else:
        lines.append(f"{a0} minus {b0} is {a0 - b0}, write {a0 - b0}.")
        tens = f"{a1} minus {b1} is {a1 - b1}, write {a1 - b1}."
    return [*lines, tens, f"So {a} - {b} = {a - b}."]


def _mul_steps(a: int, b: int) -> list[str]:
    a1, a0 = divmod(a, 10)
    ones = a0 * b
    carry, digit = divmod(ones, 10)
    lines = [f"Multiply {a} by {b} digit by digit."]
    if carry:
        lines.append(f"{a0} times {b} is {ones}, write {digit} carry {carry}.")
        tens = f"{a1} times {b} is {a1 * b}, plus {carry} is {a1 * b + carry}, write {a1 * b + carry}."
    else:
        lines.append(f"{a0} times {b} is {ones}, write {digit}.")
        tens = f"{a1} times {b} is {a1 * b}, write {a1 * b}."
    return [*lines, tens, f"So {a} × {b} = {a * b}."]


def universe(op: Op) -> list[Question]:
    """Every question of one kind, in a fixed order (subtraction never goes negative)."""
    if op == "add":
        return [Question("add", a, b) for a in TWO_DIGITS for b in TWO_DIGITS]
    if op == "sub":
        return [Question("sub", a, b) for a in TWO_DIGITS for b in TWO_DIGITS if a >= b]
    return [Question("mul", a, b) for a in TWO_DIGITS for b in ONE_DIGIT_FACTORS]


@dataclass(frozen=True)
class Split:
    """Disjoint pools per kind: ``train`` feeds training and the generate prompts, ``heldout`` evaluation."""

    train: dict[Op, list[Question]]
    heldout: list[Question]


def split_questions(heldout: int, seed: int) -> Split:
    """Hold out ``heldout`` questions, a third of each kind; the rest is the training pool."""
    rng = random.Random(seed)
    train: dict[Op, list[Question]] = {}
    held: list[Question] = []
    for i, op in enumerate(OPS):
        pool = universe(op)
        rng.shuffle(pool)
        n = heldout // len(OPS) + (1 if i < heldout % len(OPS) else 0)
        held.extend(pool[:n])
        train[op] = pool[n:]
    rng.shuffle(held)
    return Split(train=train, heldout=held)


def sample_training(split: Split, n: int, rng: random.Random) -> list[Question]:
    """``n`` training questions, kinds equally likely (multiplication's small pool repeats)."""
    return [rng.choice(split.train[rng.choice(OPS)]) for _ in range(n)]


def distinct_training_prompts(split: Split, n: int, rng: random.Random) -> list[Question]:
    """Up to ``n`` distinct training-pool questions, kinds in turn (for the generate stage)."""
    pools = {op: rng.sample(split.train[op], len(split.train[op])) for op in OPS}
    picked: list[Question] = []
    for i in range(max(len(p) for p in pools.values())):
        picked.extend(pools[op][i] for op in OPS if i < len(pools[op]))
    return picked[:n]


_ANSWER = re.compile(r"The answer is (-?\d+)\.")


def parse_answer(content: str) -> int | None:
    """The number in a visible answer, or None when the model wrote something else."""
    match = _ANSWER.search(content)
    return int(match.group(1)) if match else None
