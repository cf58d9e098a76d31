"""The long toy's world: count down by a step, many times, with a line of working per step.

Every number is written ones digit first, question and answer too: ``Ones digit first: count
down from 7214 by 7, 003 times.`` (from 4127, 300 times) is answered ``<think>`` + the start
state (``003 left, 7214.``) + one line per step (``003 left, 7214 minus 7 is 0214.``, then
``992 left, 0214 minus 7 is 3114.`` ...) + ``</think>000 left, 7202.<|im_end|>``, the end state
(2027). At 18 tokens a line, 115 to 455 steps give
2K to 8K tokens of reasoning: the lengths where a drafter's acceptance is said to fall.

Why ones digit first: each digit of a result is then the digit above it less the borrow of the
digit just written, as a person borrows right to left. Written the usual way a digit depends on
borrows not yet written, and a 1 M-parameter target got one line in 200 wrong (10 of 48 traces
of 300 lines whole). Why everywhere: a target that had to turn the question's numbers round
for the first line, and the last line's round for the answer, got those two wrong where the
lines between held (benchmarks/toy.md, the long-reasoning toy). Padding fixes the line's
length, so the digit above is always the same distance back. The answer is the countdown's end
state, written as a line begins (``000 left, 7202.``): a target that copied the last result into
``The answer is 7202.`` got it wrong after thousands of tokens (an answer comes once a trace,
so it is rarely trained there), where the start of a line, copied every step, held. The start
state opens the working for the same reason: with it, the first line's result digits stand 18
tokens after the digits they come from, as every later line's do; without it, one first line
in six went wrong.

Each line depends only on the one before it (two decrements), so the rule is the same at
every length: the target learns it on short countdowns, which are cheap to train on, and a
final phase on long ones teaches it to keep its attention local over thousands of tokens.
The final answer is checkable and is right only when every step was.

Guarantees: the held-out questions never appear among the training prompts or the training
samples; everything is a pure function of the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property

from eagle3_core.toy.config import CountdownConfig

# Every number has four digits: each line then has the same tokens (about 17.5), so a step
# count is a reasoning length, and a borrow is at most three digits deep.
SMALLEST_END, LARGEST_START = 1000, 9999


@dataclass(frozen=True)
class Countdown:
    start: int
    step: int
    times: int

    @property
    def kind(self) -> str:
        return f"by {self.step}"

    @property
    def text(self) -> str:
        return f"Ones digit first: count down from {ones_first(self.start, 4)} by {self.step}, {ones_first(self.times, 3)} times."

    @property
    def value(self) -> int:
        return self.start - self.step * self.times

    def reasoning(self) -> str:
        """The start state, then one line a step; no whitespace at either end (vLLM's parsers strip it)."""
        return "\n".join(self._lines(self.times))

    def opening(self, lines: int) -> str:
        """The start and the first ``lines`` steps of the working, each with its newline: a prefix of the
        completion's text and, digits and newlines being token boundaries, of its ids."""
        return "".join(line + "\n" for line in self._lines(lines))

    def _lines(self, count: int) -> list[str]:
        """The start state, then ``count`` steps."""
        n = self.start
        out = [f"{ones_first(self.times, 3)} left, {ones_first(n, 4)}."]
        for left in range(self.times, self.times - count, -1):
            counter, before, after = ones_first(left, 3), ones_first(n, 4), ones_first(n - self.step, 4)
            out.append(f"{counter} left, {before} minus {self.step} is {after}.")
            n -= self.step
        return out

    def answer(self) -> str:
        """``000 left, 7202.``: the end state, as the next line would begin."""
        return f"{ones_first(0, 3)} left, {ones_first(self.value, 4)}."


def ones_first(n: int, width: int) -> str:
    """``n`` zero-padded to ``width`` digits, ones digit first: ``ones_first(300, 3) == "003"``."""
    return f"{n:0{width}d}"[::-1]


STEPS = tuple(range(2, 10))
KINDS = tuple(f"by {d}" for d in STEPS)


def draw(rng: random.Random, fewest: int, most: int) -> Countdown:
    """A countdown of ``fewest``..``most`` steps whose every number has four digits."""
    step, times = rng.choice(STEPS), rng.randint(fewest, most)
    return Countdown(rng.randint(SMALLEST_END + step * times, LARGEST_START), step, times)


@dataclass(frozen=True)
class CountdownSplit:
    """``heldout`` for evaluation; training draws anything else (the space is ~10^7 questions)."""

    heldout: list[Countdown]
    prompts: list[Countdown]

    @cached_property
    def held(self) -> frozenset[Countdown]:
        """The held-out questions as a set, made once (every training batch checks against it)."""
        return frozenset(self.heldout)


def split_countdowns(cfg: CountdownConfig, heldout: int, prompts: int, seed: int) -> CountdownSplit:
    """Held-out questions and the generate stage's training prompts, disjoint, long ones only."""
    rng = random.Random(seed)
    held: dict[Countdown, None] = {}
    while len(held) < heldout:
        held[draw(rng, cfg.fewest_steps, cfg.most_steps)] = None
    picked: dict[Countdown, None] = {}
    while len(picked) < prompts:
        q = draw(rng, cfg.fewest_steps, cfg.most_steps)
        if q not in held:
            picked[q] = None
    return CountdownSplit(heldout=list(held), prompts=list(picked))


@dataclass(frozen=True)
class Sample:
    """A training question and how much of its answer is trained on: all of it (``lines`` None),
    or its opening ``lines`` lines (a long countdown's start, at a short one's cost)."""

    question: Countdown
    lines: int | None = None


def training_batch(split: CountdownSplit, cfg: CountdownConfig, long: bool, size: int, rng: random.Random):
    """``size`` samples of similar length (padding stays small), never of a held-out question.

    The long phase trains on whole long countdowns. The short phase mixes whole short ones (the
    end: the last lines, ``</think>``, the answer) with the openings of long ones (three-digit
    counters, which short countdowns never reach), each ``short_steps`` lines at most."""
    fewest, most = (cfg.fewest_steps, cfg.most_steps) if long else (1, cfg.short_steps)
    centre = rng.randint(fewest, most)
    spread = max(1, (most - fewest) // 20)
    low, high = max(fewest, centre - spread), min(most, centre + spread)
    batch: list[Sample] = []
    while len(batch) < size:
        opening = not long and len(batch) % 2 == 1
        q = draw(rng, cfg.fewest_steps, cfg.most_steps) if opening else draw(rng, low, high)
        lines = rng.randint(low, high) if opening else q.times
        if not long and rng.random() < 0.5:
            q = crossing(q, lines, rng)
        if q not in split.held:
            batch.append(Sample(q, lines if opening else None))
    return batch


def crossing(q: Countdown, lines: int, rng: random.Random) -> Countdown:
    """``q`` moved so that within its first ``lines`` lines a number crosses a multiple of 100
    or 1,000 and, for a long one, its counter a multiple of 100. Those borrows reach the
    thousands digit (5003 minus 7 is 4996, 400 left then 399 left); at random starts they come
    once in hundreds of lines, and a target trained so stays wrong on them (a held-out trace of
    300 lines then holds two or three such errors)."""
    times = q.times
    if times > 100 and rng.random() < 0.5:
        times = max(times - times % 100, 100) + rng.randint(0, max(lines - 1, 0))
    span = q.step * lines
    unit = rng.choice((100, 1000))
    first = -(-(SMALLEST_END + q.step * times) // unit) * unit
    if first > LARGEST_START - span:
        return q
    boundary = rng.randrange(first, LARGEST_START - span + 1, unit)
    return Countdown(boundary + rng.randint(0, span), q.step, times)
