"""The target tokenizer: the one loader, and its facts checked against the recipe before they are trusted.

Below every stage that reads a tokenizer (reconstruct, vocab, evaluate, the pre-flight), so each
loads it the same way: ``load_tokenizer`` reads a local directory (never a hub:
``local_files_only``, so a missing file never becomes a download), with the tokenizer's own code
only when the recipe allows it (Kimi's tiktoken tokenizer needs it). A stage that called
``AutoTokenizer.from_pretrained`` itself forgot ``trust_remote_code`` once (evaluate, so
Kimi-K2.5's offline and by-context evaluation failed where its recipe allows the tokenizer's code).

``token_facts`` proves that every configured special token (think-open, think-close,
end-of-turn, tool-call start) is ONE id in this tokenizer and, where the recipe names the id, the same id:
a think token that the tokenizer splits into pieces would put ``<``, ``think``, ``>`` where the
target emits a single id, and the drafter would learn a sequence the target never produced.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_core.errors import ConfigError, InputError
from eagle3_core.target.config import TargetConfig

# Files whose bytes decide how text becomes ids (and how a chat renders).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer.model",
    "tiktoken.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
)


# Tokenizers loaded in this process: (folder, trust_remote_code, its files' sizes and times) -> the tokenizer.
# A run's stages asked for the same one 8 times, 1.6 CPU-seconds each for a 150K vocabulary (2026-12-07).
_LOADED: dict[tuple, Any] = {}
KEEP_LOADED = 4


def folder_state(path: Path) -> tuple:
    """What a loaded tokenizer depends on in its folder: each tokenizer file's and code file's size and
    modification time. A file written since gives another state, so another load."""
    return tuple(
        (f.name, f.stat().st_size, f.stat().st_mtime_ns)
        for f in sorted(path.iterdir())
        if f.name in TOKENIZER_FILES or f.suffix == ".py"
    )


def load_tokenizer(path: str | Path, trust_remote_code: bool = False) -> Any:
    """A transformers tokenizer from a local directory, or an InputError that says why not. Loaded once a
    process while its folder's files stand (``folder_state``): the callers share it and never change it."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(
            f"tokenizer directory not found: {path}",
            fix="pass --tokenizer a local directory holding the target's tokenizer files",
        )
    key = (str(path.resolve()), trust_remote_code, folder_state(path))
    if key not in _LOADED:
        if len(_LOADED) >= KEEP_LOADED:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = _load(path, trust_remote_code)
    return _LOADED[key]


def _load(path: Path, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code, local_files_only=True)
    except ValueError as exc:
        if "trust_remote_code" in str(exc) and not trust_remote_code:
            raise ConfigError(
                f"the tokenizer in {path} ships its own code",
                fix="pass --trust-remote-code (target.trust_remote_code: true) if you trust it",
            ) from None
        raise InputError(
            f"cannot load a tokenizer from {path}: {exc}",
            fix="check that the directory holds tokenizer.json or the tokenizer's own files",
        ) from None
    except OSError as exc:
        raise InputError(
            f"cannot load a tokenizer from {path}: {exc}",
            fix="check that the directory holds tokenizer.json or the tokenizer's own files",
        ) from None


@dataclass(frozen=True)
class TokenFacts:
    """The special ids of the target, verified against its tokenizer.

    ``think_open_ids`` / ``think_close_ids`` are the markers that open and close the reasoning in
    the output: one id each for a think pair, several for harmony's channel headers
    (``<|channel|>analysis<|message|>``). ``turn_end_ids`` holds every id that ends an assistant
    turn, ``end_of_turn_id`` first. ``tool_call_start_id`` opens a tool call (None where the recipe
    names no such token).
    """

    end_of_turn_id: int
    think_open_ids: tuple[int, ...] | None
    think_close_ids: tuple[int, ...] | None
    vocab_size: int
    fingerprint: str
    turn_end_ids: tuple[int, ...] = ()
    tool_call_start_id: int | None = None

    @property
    def reasons(self) -> bool:
        """True for a reasoning target (it has reasoning markers)."""
        return self.think_open_ids is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "end_of_turn_id": self.end_of_turn_id,
            "turn_end_ids": list(self.turn_end_ids),
            "think_open_ids": list(self.think_open_ids) if self.think_open_ids else None,
            "think_close_ids": list(self.think_close_ids) if self.think_close_ids else None,
            "vocab_size": self.vocab_size,
            "tokenizer": self.fingerprint,
        }


def tokenizer_fingerprint(path: str | Path) -> str:
    """sha256 over the tokenizer files present (name + bytes), in a fixed order."""
    digest = hashlib.sha256()
    for name in TOKENIZER_FILES:
        file = Path(path) / name
        if file.is_file():
            digest.update(name.encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def target_vocab_size(path: str | Path, tokenizer: Any) -> int:
    """Rows of the target's embedding (config.json ``vocab_size``), else the tokenizer's length.

    The model's vocab is often padded past the tokenizer (Qwen3: 151936 vs 151669 ids);
    ``t2d`` must cover the model's rows, so the config wins when present.
    """
    from eagle3_core.contracts.target import CONFIG, language_config

    if not (Path(path) / CONFIG).is_file():
        return len(tokenizer)
    size = language_config(path).get("vocab_size")
    return max(int(size), len(tokenizer)) if size else len(tokenizer)


def single_id(tokenizer: Any, text: str, expected: int | None, field: str, id_field: str | None = None) -> int:
    """The one id ``text`` encodes to; ConfigError naming the recipe's field and the tokenizer's value
    when it is missing, split, or not ``expected``."""
    id_field = id_field or f"{field}_id"
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ConfigError(
            f"the tokenizer has no single token for target.{field} {text!r} (it encodes as {len(ids)} ids: {ids[:8]})",
            fix=f"point --tokenizer at the target's own tokenizer, or set target.{field} to the token it uses"
            + (
                "; for a non-reasoning model set target.think_open and target.think_close to null"
                if field.startswith("think")
                else ""
            ),
        )
    if expected is not None and ids[0] != expected:
        raise ConfigError(
            f"target.{id_field} is {expected} but the tokenizer maps {text!r} to {ids[0]}",
            fix=f"set target.{id_field}: {ids[0]} in the recipe, or use the target's own tokenizer",
        )
    return ids[0]


def token_facts(tokenizer: Any, target: TargetConfig, path: str | Path) -> TokenFacts:
    """Verify the recipe's special tokens against ``tokenizer``; return their ids."""
    eot = single_id(tokenizer, target.end_of_turn, target.end_of_turn_id, "end_of_turn")
    ends = [eot] + [
        single_id(tokenizer, t.text, t.id, f"other_turn_ends[{i}].text", id_field=f"other_turn_ends[{i}].id")
        for i, t in enumerate(target.other_turn_ends)
    ]
    return TokenFacts(
        end_of_turn_id=eot,
        vocab_size=target_vocab_size(path, tokenizer),
        fingerprint=tokenizer_fingerprint(path),
        turn_end_ids=tuple(dict.fromkeys(ends)),
        tool_call_start_id=_tool_call_start_id(tokenizer, target),
        **_marker_ids(tokenizer, target),
    )


def _tool_call_start_id(tokenizer: Any, target: TargetConfig) -> int | None:
    start = target.tool_call_start
    if start is None:
        return None
    return single_id(tokenizer, start.text, start.id, "tool_call_start.text", id_field="tool_call_start.id")


def _marker_ids(tokenizer: Any, target: TargetConfig) -> dict[str, tuple[int, ...] | None]:
    """The reasoning markers' ids: each think token ONE id; harmony's header tokens each one id,
    the markers then encoded from their texts (channel names are plain text)."""
    if target.think_open is not None:
        return {
            "think_open_ids": (single_id(tokenizer, target.think_open, target.think_open_id, "think_open"),),
            "think_close_ids": (single_id(tokenizer, target.think_close, target.think_close_id, "think_close"),),
        }
    if target.harmony is None:
        return {"think_open_ids": None, "think_close_ids": None}
    for name, token in target.harmony.tokens().items():
        single_id(tokenizer, token.text, token.id, f"harmony.{name}.text", id_field=f"harmony.{name}.id")
    opening, closing = target.reasoning_markers()
    return {
        "think_open_ids": tuple(tokenizer.encode(opening, add_special_tokens=False)),
        "think_close_ids": tuple(tokenizer.encode(closing, add_special_tokens=False)),
    }


def encode_batch(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Ids of each text, specials in the text kept as their ids, none added.

    Uses the Rust backend's batch encoder when there is one (one call for the whole batch:
    the measured limit in benchmarks/reconstruct.md); a slow tokenizer (Kimi's tiktoken) encodes
    one text at a time.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    fast = getattr(backend, "encode_batch_fast", backend.encode_batch)
    return [enc.ids for enc in fast(texts, add_special_tokens=False)]
