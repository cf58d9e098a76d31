"""The built toy target (the session's `toy_target`): the tokenizer, the template, the model.

These read the real build for configs/toy.yaml (cached; about 4 minutes the first time).
"""

import json
import math

import pytest

from eagle3_core.target.hardware import cpu_computes_bf16
from eagle3_core.toy.build import HELDOUT_PROMPTS, TRAIN_PROMPTS, read_report
from tests.fixtures.toy import toy_recipe

TEXTS = [
    "What is 47 + 38?",
    " leading space, two  inner spaces and a trailing one ",
    "\n\nnewlines first\nand last\n",
    "7 plus 8 is 15, write 5 carry 1.\n4 plus 3 is 7, plus 1 is 8, write 8.\nSo 47 + 38 = 85.\n",
    "So 48 × 7 = 336.\n</think>The answer is 336.",
    "\tunicode: héllo wörld ✓ 日本語 🙂",
]


@pytest.fixture(scope="module")
def tokenizer(toy_target):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(toy_target))


@pytest.mark.parametrize("text", TEXTS)
def test_the_tokenizer_round_trips_text_byte_exactly(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_the_chat_template_renders_the_kimi_k2_5_layout(tokenizer):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "The answer is 4."},
        {"role": "user", "content": "What is 47 + 38?"},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_system|>system<|im_middle|>Be brief.<|im_end|>"
        "<|im_user|>user<|im_middle|>What is 2 + 2?<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|><think></think>The answer is 4.<|im_end|>"
        "<|im_user|>user<|im_middle|>What is 47 + 38?<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|><think>"
    )
    off = tokenizer.apply_chat_template(messages[1:2], tokenize=False, add_generation_prompt=True, thinking=False)
    assert off.endswith("<|im_assistant|>assistant<|im_middle|><think></think>")


def test_think_tokens_are_single_non_special_ids_and_the_recipe_names_them(tokenizer):
    target = toy_recipe()["target"]
    for text, key in (("<think>", "think_open_id"), ("</think>", "think_close_id"), ("<|im_end|>", "end_of_turn_id")):
        assert tokenizer.encode(text, add_special_tokens=False) == [target[key]], text
    # the flag that decoding (here and in vLLM's detokenizer) honours is the added token's own
    added = tokenizer.added_tokens_decoder
    assert not added[target["think_open_id"]].special and not added[target["think_close_id"]].special
    assert all(
        added[tokenizer.convert_tokens_to_ids(t)].special
        for t in ("<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>", "[EOS]")
    )
    ids = tokenizer.encode("<think>x</think>y<|im_end|>", add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<think>x</think>y"


def test_generation_stops_at_the_end_of_the_turn(toy_target, tokenizer):
    config = json.loads((toy_target / "generation_config.json").read_text())
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in config["eos_token_id"]


def test_the_draft_vocabulary_is_a_real_subset_of_the_tokens_the_target_writes(toy_target, tokenizer):
    """d2t/t2d are exercised: the recipe's draft vocab is smaller than the used vocab, which is
    smaller than the whole vocab."""
    from eagle3_core.toy.corpus import OPS, split_questions
    from eagle3_core.toy.train import completion_text

    split = split_questions(500, seed=0)
    used = {
        i
        for op in OPS
        for q in split.train[op][:300]
        for i in tokenizer.encode(completion_text(q), add_special_tokens=False)
    }
    assert toy_recipe()["vocab"]["draft_vocab_size"] < len(used) < len(tokenizer)


def test_the_heldout_accuracy_is_high_in_fp32_and_in_bf16(toy_target):
    report = read_report(toy_target)
    assert report["heldout"]["questions"] == 500
    assert report["heldout"]["answer_accuracy"] >= 0.9, report["heldout"]
    if report["heldout_bf16"] is None:  # bf16 left unscored only where the CPU has no bf16 kernels
        assert not report["training"]["bf16_autocast"] and not cpu_computes_bf16()
    else:
        assert report["heldout_bf16"]["answer_accuracy"] >= 0.85, report["heldout_bf16"]
    assert min(report["heldout"]["per_op"].values()) >= 0.75, report["heldout"]


def test_the_saved_model_answers_heldout_prompts_it_never_saw(toy_target, tokenizer):
    """Re-scores 45 held-out questions from the saved weights: the report is not taken on trust."""
    import torch
    from transformers import AutoModelForCausalLM

    from eagle3_core.toy.corpus import parse_answer, split_questions
    from eagle3_core.toy.train import greedy_completions

    questions = split_questions(500, seed=0).heldout[:45]
    heldout_texts = {json.loads(l)["messages"][0]["content"] for l in (toy_target / HELDOUT_PROMPTS).open()}
    train_texts = {json.loads(l)["messages"][0]["content"] for l in (toy_target / TRAIN_PROMPTS).open()}
    assert {q.text for q in questions} <= heldout_texts and not heldout_texts & train_texts
    model = AutoModelForCausalLM.from_pretrained(str(toy_target), dtype=torch.float32)
    texts = greedy_completions(model, tokenizer, questions, max_new_tokens=96)
    right = sum(parse_answer(t.partition("</think>")[2]) == q.value for q, t in zip(questions, texts))
    assert right >= math.ceil(0.8 * len(questions)), list(zip([q.text for q in questions], texts))[:5]


def test_teacher_forced_scoring_finds_the_completions_greedy_decoding_writes_exactly(toy_target):
    """The long toy is scored from one forward pass a question (score_forced): on the toy's
    held-out questions it must flag the same completions exact as greedy decoding does."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eagle3_core.toy.corpus import split_questions
    from eagle3_core.toy.train import completion_text, greedy_completions, score_forced

    questions = split_questions(500, seed=0).heldout[:90]
    tok = AutoTokenizer.from_pretrained(str(toy_target))
    model = AutoModelForCausalLM.from_pretrained(str(toy_target), dtype=torch.float32)
    texts = greedy_completions(model, tok, questions, max_new_tokens=96)
    greedy = [t == completion_text(q).removesuffix("<|im_end|>") for q, t in zip(questions, texts)]
    forced = [score_forced(model, tok, [q])["exact_completion"] == 1.0 for q in questions]
    assert sum(greedy) >= 45  # a build that writes most completions exactly: the comparison means something
    assert sum(f != g for f, g in zip(forced, greedy)) <= 1, [
        q.text for q, f, g in zip(questions, forced, greedy) if f != g
    ]
