"""The toy's dataset answers: its training prompts answered as public datasets answer them."""

import json

from eagle3_core.stages.generate.dataset_answer import dataset_answer
from eagle3_core.toy.build import REPORT_NAME, TRAIN_PROMPTS, build_toy_target, recipe_hash, toy_target_dir
from eagle3_core.toy.config import ToyTargetConfig
from eagle3_core.toy.corpus import Question, parse_answer
from eagle3_core.toy.dataset_answers import PLAIN, REASONED, ensure_dataset_answers

QUESTIONS = [Question("add", 47, 38), Question("sub", 52, 17), Question("mul", 56, 7)]


def toy_dir_with_prompts(path):
    path.mkdir(parents=True, exist_ok=True)
    rows = [{"messages": [{"role": "user", "content": q.text}]} for q in QUESTIONS]
    (path / TRAIN_PROMPTS).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def read_rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_plain_answers_are_the_right_result_in_another_wording_without_reasoning(tmp_path):
    files = ensure_dataset_answers(toy_dir_with_prompts(tmp_path))

    rows = read_rows(files["plain"])
    answers = [dataset_answer(r) for r in rows]
    assert [r["messages"][0]["content"] for r in rows] == [q.text for q in QUESTIONS]  # same prompts, same order
    assert [a.content for a in answers] == ["47 + 38 equals 85.", "52 - 17 equals 35.", "56 × 7 equals 392."]
    assert all(a.reasoning == "" and parse_answer(a.content) is None for a in answers)  # not the toy's wording


def test_the_reasoned_answers_carry_a_short_reasoning_in_another_style_than_the_toys(tmp_path):
    files = ensure_dataset_answers(toy_dir_with_prompts(tmp_path))

    answers = [dataset_answer(r) for r in read_rows(files["reasoned"])]
    assert [a.reasoning_source for a in answers] == ["reasoning_content"] * 3
    assert [a.reasoning for a in answers] == [
        "47 + 30 = 77, 77 + 8 = 85.",
        "52 - 10 = 42, 42 - 7 = 35.",
        "50 × 7 = 350, 6 × 7 = 42, 350 + 42 = 392.",
    ]
    assert all(a.content.endswith(f"{q.value}.") for a, q in zip(answers, QUESTIONS))
    assert not any("digit by digit" in a.reasoning or "carry" in a.reasoning for a in answers)  # not the toy's style
    assert all(q.reasoning() not in a.reasoning for a, q in zip(answers, QUESTIONS))


def test_a_cached_build_gains_the_answers_without_retraining_and_keeps_its_recipe_hash(tmp_path):
    cfg = ToyTargetConfig(cache_dir=str(tmp_path))
    built = toy_dir_with_prompts(toy_target_dir(cfg))
    (built / REPORT_NAME).write_text("{}")  # a finished build (this test never trains one)
    before = recipe_hash(cfg)

    path = build_toy_target(cfg)

    assert path == built and recipe_hash(cfg) == before
    assert (path / PLAIN).is_file() and (path / REASONED).is_file()
    assert (path / REPORT_NAME).read_text() == "{}"  # not rebuilt


def test_the_long_toys_countdowns_are_answered_so_too_in_one_line_where_the_toy_writes_hundreds(tmp_path):
    from eagle3_core.toy.countdown import Countdown

    q = Countdown(start=4127, step=7, times=300)
    tmp_path.mkdir(exist_ok=True)
    row = {"messages": [{"role": "user", "content": q.text}]}
    (tmp_path / TRAIN_PROMPTS).write_text(json.dumps(row) + "\n", encoding="utf-8")

    files = ensure_dataset_answers(tmp_path)

    plain = dataset_answer(read_rows(files["plain"])[0])
    reasoned = dataset_answer(read_rows(files["reasoned"])[0])
    # the world's notation, every number ones digit first: 4127 - 300 x 7 = 4127 - 2100 = 2027
    assert plain.content == "Counting down from 7214 by 7, 003 times, ends at 7202." and plain.reasoning == ""
    assert reasoned.reasoning == "003 times 7 is 0012, and 7214 minus 0012 is 7202."
    assert reasoned.content == "So it is 7202." and q.value == 2027
