"""The toy corpus: correct working, one operation a step, a held-out split that never leaks."""

import random
import re

from eagle3_core.toy.corpus import OPS, distinct_training_prompts, parse_answer, split_questions, universe

CLAUSE = re.compile(r"(\d+) (plus|minus|times) (\d+) is (\d+)")
APPLY = {"plus": lambda x, y: x + y, "minus": lambda x, y: x - y, "times": lambda x, y: x * y}


def test_every_worked_answer_in_the_universe_is_right():
    for op in OPS:
        for q in universe(op):
            assert q.reasoning().endswith(f"= {q.value}.") and q.reasoning() == q.reasoning().strip()
            assert parse_answer(q.answer()) == q.value


def test_each_step_is_one_operation_on_a_digit_or_carry():
    for op in OPS:
        for q in universe(op)[::37]:
            for line in q.reasoning().splitlines()[1:-1]:
                steps = CLAUSE.findall(line)
                assert steps, line
                for x, word, y, result in steps:
                    assert APPLY[word](int(x), int(y)) == int(result), line
                for clause in line.split(", "):  # one operation per clause
                    assert sum(clause.count(w) for w in APPLY) <= 1, line


def test_heldout_questions_never_appear_in_the_training_pool():
    split = split_questions(500, seed=0)
    train = {q for op in OPS for q in split.train[op]}
    assert len(split.heldout) == 500 and len(set(split.heldout)) == 500
    assert not train & set(split.heldout)
    assert {q.op for q in split.heldout} == set(OPS)


def test_the_split_and_the_exported_prompts_are_a_function_of_the_seed():
    a, b = split_questions(90, seed=3), split_questions(90, seed=3)
    assert a.heldout == b.heldout
    assert split_questions(90, seed=4).heldout != a.heldout
    prompts = distinct_training_prompts(a, 50, random.Random(1))
    assert len(set(prompts)) == 50 and prompts == distinct_training_prompts(b, 50, random.Random(1))
    assert not set(prompts) & set(a.heldout)


def test_a_wrong_or_missing_answer_parses_as_none_or_its_number():
    assert parse_answer("The answer is 85.") == 85
    assert parse_answer("I think 85") is None
