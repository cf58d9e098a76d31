"""The long toy's world: countdowns whose working is right, 2K-8K tokens long, never leaking
held-out questions into training."""

import random
import re
from pathlib import Path

import pytest
import yaml

from eagle3_core.toy.config import CountdownConfig, ToyTargetConfig
from eagle3_core.toy.countdown import Countdown, split_countdowns, training_batch

LONG_RECIPE = Path(__file__).resolve().parents[2] / "configs" / "toy-long.yaml"
LINE = re.compile(r"(\d{3}) left, (\d{4}) minus (\d) is (\d{4})\.")


def long_recipe() -> dict:
    return yaml.safe_load(LONG_RECIPE.read_text(encoding="utf-8"))


def test_each_line_is_one_step_of_both_countdowns_and_the_answer_is_where_they_end():
    q = Countdown(start=1003, step=7, times=12)
    start, *lines = q.reasoning().split("\n")
    assert start == "210 left, 3001." and len(lines) == 12 and q.reasoning() == q.reasoning().strip()
    n = q.start
    for left, line in zip(range(12, 0, -1), lines):
        got = LINE.fullmatch(line)
        assert got, line
        counter, before, step, after = got.groups()
        assert [int(counter[::-1]), int(before[::-1]), int(step), int(after[::-1])] == [left, n, 7, n - 7]
        n -= 7
    assert q.value == n == 1003 - 84 and q.answer() == "000 left, 9190."  # 0919, ones digit first
    assert q.text == "Ones digit first: count down from 3001 by 7, 210 times."  # 1003, 12 times


def test_the_recipes_prompts_carry_two_to_eight_thousand_tokens_of_reasoning(tmp_path):
    """Measured with a tokenizer trained the way the build trains it (digits one a token)."""
    from eagle3_core.toy.build import _world

    cfg = ToyTargetConfig.model_validate({**long_recipe()["toy"], "heldout_questions": 20, "train_prompts": 40})
    world = _world(cfg)
    from eagle3_core.toy.tokenizer import train_tokenizer

    tok = train_tokenizer(world.texts, cfg.vocab_size)
    lengths = [len(tok.encode(q.reasoning()).ids) for q in world.heldout + world.prompts]
    assert 2000 <= min(lengths) and max(lengths) <= 8192, (min(lengths), max(lengths))
    assert max(lengths) > 6000 and min(lengths) < 3000  # the whole range, not one corner of it


def test_heldout_questions_are_in_neither_the_prompts_nor_any_training_batch():
    world = CountdownConfig(fewest_steps=3, most_steps=6, short_steps=2)
    split = split_countdowns(world, heldout=60, prompts=200, seed=0)
    held = set(split.heldout)
    assert len(held) == 60 and len(set(split.prompts)) == 200 and not held & set(split.prompts)
    rng = random.Random(1)
    samples = [s for long in (True, False) for _ in range(300) for s in training_batch(split, world, long, 8, rng)]
    assert not {s.question for s in samples} & held
    assert all(1000 <= s.question.value < s.question.start <= 9999 for s in samples)
    assert all(3 <= s.question.times <= 6 for s in samples[: 300 * 8])  # the long phase's
    short = training_batch(split, world, False, 64, rng)
    whole, openings = [s for s in short if s.lines is None], [s for s in short if s.lines is not None]
    assert len(whole) == len(openings) == 32
    assert all(1 <= s.question.times <= 2 for s in whole) and all(1 <= s.lines <= 2 for s in openings)
    assert all(3 <= s.question.times for s in openings)  # long countdowns' starts, at a short cost


def test_an_opening_is_a_prefix_of_the_answer_in_text_and_in_ids():
    from eagle3_core.toy.tokenizer import train_tokenizer
    from eagle3_core.toy.train import completion_text

    q = Countdown(start=9321, step=9, times=150)
    tok = train_tokenizer([completion_text(Countdown(5000, 3, 40)), q.text] * 5, 384)
    whole = tok.encode(completion_text(q)).ids
    for lines in (1, 7, 40):
        opening = q.opening(lines)
        assert completion_text(q).startswith(opening) and opening.count("\n") == lines + 1  # the start state too
        ids = tok.encode(opening).ids
        assert whole[: len(ids)] == ids


def test_the_split_is_a_function_of_the_seed():
    world = CountdownConfig()
    a, b = split_countdowns(world, 10, 20, seed=3), split_countdowns(world, 10, 20, seed=3)
    assert a == b and split_countdowns(world, 10, 20, seed=4).heldout != a.heldout


def test_a_batch_keeps_lengths_close_so_padding_stays_small():
    world = CountdownConfig()
    split = split_countdowns(world, 5, 5, seed=0)
    rng = random.Random(0)
    for _ in range(20):
        times = [s.question.times for s in training_batch(split, world, True, 4, rng)]
        assert max(times) - min(times) <= 2 * max(1, (world.most_steps - world.fewest_steps) // 20)


def test_the_long_phase_holds_a_short_step_every_short_every_steps():
    from eagle3_core.toy.train import countdown_batches

    class Ids:  # a tokenizer stand-in: one id a character is enough to count a batch's samples
        def __call__(self, texts, add_special_tokens=False):
            return {"input_ids": [[1] * len(text) for text in texts]}

        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
            return messages[0]["content"]

    world = CountdownConfig(
        fewest_steps=3, most_steps=6, short_steps=2, long_fraction=0.5, long_batch_size=2, short_every=3
    )
    cfg = ToyTargetConfig(train_steps=12, batch_size=5, countdown=world)
    batches = countdown_batches(Ids(), split_countdowns(world, 4, 4, seed=0), cfg)
    sizes = [len(batches(step)) for step in range(12)]
    assert sizes == [5] * 6 + [2, 2, 5, 2, 2, 5]


def test_step_ranges_out_of_order_are_one_config_error():
    with pytest.raises(ValueError, match="short_steps <= fewest_steps <= most_steps"):
        CountdownConfig(fewest_steps=500, most_steps=200)


def test_adding_the_long_world_left_the_toys_recipe_hash_as_it_was():
    """The toy's cache key (and so every cached build, and the demo's figures) did not move."""
    from eagle3_core.toy.build import recipe_hash
    from tests.fixtures.toy import toy_recipe

    cfg = ToyTargetConfig.model_validate(toy_recipe()["toy"])
    assert "countdown" not in cfg.recipe()
    assert recipe_hash(cfg) == "a22b63197d5b6e36"


def test_the_long_recipe_is_a_valid_pipeline_config_whose_ids_are_the_built_tokenizers(tmp_path):
    """The ids the recipe names are the ones the build's tokenizer gives (trained here as the
    build trains it: the tokenizer is a pure function of the recipe), and the served context
    holds the longest prompt and answer."""
    from transformers import AutoTokenizer

    from eagle3_core.config import PipelineConfig
    from eagle3_core.toy.build import _world
    from eagle3_core.toy.tokenizer import save_tokenizer, train_tokenizer
    from eagle3_core.toy.train import completion_text, prompt_text

    config = PipelineConfig.from_yaml(LONG_RECIPE)
    world = _world(config.toy)
    save_tokenizer(train_tokenizer(world.texts, config.toy.vocab_size), tmp_path, config.toy.max_position_embeddings)
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    target = config.target
    for text, expected in (
        (target.think_open, target.think_open_id),
        (target.think_close, target.think_close_id),
        (target.end_of_turn, target.end_of_turn_id),
    ):
        assert tok.encode(text, add_special_tokens=False) == [expected], text
    longest = max(world.heldout + world.prompts, key=lambda q: q.times)
    prompt = len(tok.encode(prompt_text(tok, longest), add_special_tokens=False))
    answer = len(tok.encode(completion_text(longest), add_special_tokens=False))
    assert answer <= config.generate.max_tokens and prompt + config.generate.max_tokens <= config.serve.max_model_len
    assert config.serve.max_model_len <= config.toy.max_position_embeddings
