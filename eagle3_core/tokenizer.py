"""The one way to load a target's tokenizer: a local directory, never a hub, its own code only when allowed.

Below every stage that reads a tokenizer (reconstruct, vocab, evaluate, the pre-flight): a
stage that called ``AutoTokenizer.from_pretrained`` itself forgot ``trust_remote_code`` once
(evaluate, so Kimi-K2.5's offline and by-context evaluation failed where its recipe allows the
tokenizer's code). ``local_files_only`` keeps a missing file from becoming a download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_core.errors import ConfigError, InputError


def load_tokenizer(path: str | Path, trust_remote_code: bool = False) -> Any:
    """A transformers tokenizer from a local directory, or an InputError that says why not."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not path.is_dir():
        raise InputError(
            f"tokenizer directory not found: {path}",
            fix="pass --tokenizer a local directory holding the target's tokenizer files",
        )
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
