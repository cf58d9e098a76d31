"""The toy's "dataset answers": its training prompts answered the way public datasets answer.

A regenerated answer is the toy target's own ``<think>`` digit-by-digit working ``</think>``
``The answer is N.``. Public SFT sets (mlabonne/open-perfectblend, most of it) hold answers other
models wrote, mostly without reasoning. Two files in the toy's directory stand for them, one row
per line of ``prompts_train.jsonl``, each a ``messages`` conversation ending with the answer
(``generate.source: dataset`` reads them):

- ``dataset_answers.jsonl``: the correct result in another wording, no reasoning
  (``"47 + 38 equals 85."``);
- ``dataset_answers_reasoned.jsonl``: the same with a short reasoning in another style than the
  toy's, in the assistant turn's ``reasoning_content`` (tens first, whole numbers, no digit
  columns: ``"47 + 30 = 77, 77 + 8 = 85."``).

The long toy's countdowns are answered so too, in their world's notation (every number ones
digit first): ``"Counting down from 7214 by 7, 003 times, ends at 7202."``, and, reasoned, one
multiplication where the toy writes 300 lines (``"003 times 7 is 0012, and 7214 minus 0012 is
7202."``: 300 times 7 is 2100).

Guarantees: a pure function of ``prompts_train.jsonl``; written atomically when missing, never
part of the toy's recipe hash (they do not change the model, so adding them rebuilds nothing).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

from eagle3_core.run.fsio import atomic_path
from eagle3_core.toy.corpus import SYMBOL, Question
from eagle3_core.toy.countdown import Countdown, ones_first

PLAIN, REASONED = "dataset_answers.jsonl", "dataset_answers_reasoned.jsonl"
_QUESTION = re.compile(r"What is (\d+) (.) (\d+)\?")
_COUNTDOWN = re.compile(r"Ones digit first: count down from (\d{4}) by (\d), (\d{3}) times\.")
_OPS = {symbol: op for op, symbol in SYMBOL.items()}


def ensure_dataset_answers(toy_dir: str | Path) -> dict[str, Path]:
    """The two files (``plain``, ``reasoned``) in ``toy_dir``, written first where missing."""
    toy_dir = Path(toy_dir)
    files = {"plain": toy_dir / PLAIN, "reasoned": toy_dir / REASONED}
    if all(f.is_file() for f in files.values()):
        return files
    questions = [_question(json.loads(line)) for line in (toy_dir / "prompts_train.jsonl").open(encoding="utf-8")]
    answers = [dataset_answers(q) for q in questions]
    _write(files["plain"], [_row(q, a.plain, None) for q, a in zip(questions, answers)])
    _write(files["reasoned"], [_row(q, a.content, a.reasoning) for q, a in zip(questions, answers)])
    return files


class Answers(NamedTuple):
    plain: str  # the result in another wording, no reasoning
    content: str  # the reasoned answer's final turn
    reasoning: str  # its short reasoning, in another style than the toy's


def dataset_answers(q: Question | Countdown) -> Answers:
    return _countdown_answers(q) if isinstance(q, Countdown) else _arithmetic_answers(q)


def _arithmetic_answers(q: Question) -> Answers:
    """Tens first on whole numbers: another style than the toy's digit columns with carries."""
    if q.op == "mul":
        tens, ones = divmod(q.a, 10)
        tens_part, ones_part = tens * 10 * q.b, ones * q.b
        reasoning = (
            f"{tens * 10} × {q.b} = {tens_part}, {ones} × {q.b} = {ones_part}, {tens_part} + {ones_part} = {q.value}."
        )
    else:
        tens, ones = divmod(q.b, 10)
        sign = SYMBOL[q.op]
        partial = q.a + tens * 10 if q.op == "add" else q.a - tens * 10
        reasoning = f"{q.a} {sign} {tens * 10} = {partial}, {partial} {sign} {ones} = {q.value}."
    return Answers(f"{q.a} {SYMBOL[q.op]} {q.b} equals {q.value}.", f"So it is {q.value}.", reasoning)


def _countdown_answers(q: Countdown) -> Answers:
    """In the world's notation (ones digit first); one multiplication, not a line a step."""
    start, times, value = ones_first(q.start, 4), ones_first(q.times, 3), ones_first(q.value, 4)
    span = ones_first(q.step * q.times, 4)
    return Answers(
        f"Counting down from {start} by {q.step}, {times} times, ends at {value}.",
        f"So it is {value}.",
        f"{times} times {q.step} is {span}, and {start} minus {span} is {value}.",
    )


def _question(row: dict) -> Question | Countdown:
    text = row["messages"][-1]["content"]
    if match := _QUESTION.fullmatch(text):
        return Question(_OPS[match.group(2)], int(match.group(1)), int(match.group(3)))
    if match := _COUNTDOWN.fullmatch(text):
        start, step, times = match.groups()
        return Countdown(int(start[::-1]), int(step), int(times[::-1]))
    raise ValueError(f"not a toy question: {text!r}")


def _row(q: Question | Countdown, content: str, reasoning: str | None) -> dict:
    answer = {"role": "assistant", "content": content}
    if reasoning is not None:
        answer["reasoning_content"] = reasoning
    return {"messages": [{"role": "user", "content": q.text}, answer]}


def _write(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
