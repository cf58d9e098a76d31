"""Fixtures of the reconstruct tests: the family tokenizers, each built once per session when first used."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.families.tiny_targets import deepseek_v4_tokenizer, offline_tokenizer
from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer
from tests.stages.reconstruct.families_more import MORE_FAMILIES

ALL_FAMILIES = FAMILIES | MORE_FAMILIES
# families whose REAL tokenizer a pip package ships: their folder is the package's files, not a built one
# (V4.1's own tokenizer.json is shipped by none: V4's real one holds every text its recipe declares, which has no ids)
REAL_FAMILIES = {
    "deepseek_v4": deepseek_v4_tokenizer,
    "deepseek_v4_1": deepseek_v4_tokenizer,
    "glm47": offline_tokenizer("glm-4.7-flash"),
    "minimax_m3": offline_tokenizer("minimax-m3"),
}


class _Built(dict):
    """family name -> built value, made on first access (a 200K-id tokenizer takes ~1 s to write)."""

    def __init__(self, make) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, name: str):
        if name not in ALL_FAMILIES and name not in REAL_FAMILIES:
            raise KeyError(name)
        self[name] = self._make(name)
        return self[name]


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory) -> dict[str, Path]:
    """family name -> a local tokenizer directory with the family's real special ids (the real tokenizer
    where a package ships it)."""
    root = tmp_path_factory.mktemp("family-tokenizers")

    def build(name: str) -> Path:
        if name in REAL_FAMILIES:
            return REAL_FAMILIES[name](root / name)
        return build_family_tokenizer(ALL_FAMILIES[name], root / name)

    return _Built(build)


@pytest.fixture(scope="session")
def family_tokenizers(family_dirs):
    """family name -> the loaded transformers tokenizer."""
    from eagle3_core.target.tokenizer import load_tokenizer

    built = _Built(lambda name: load_tokenizer(family_dirs[name]))
    for name in FAMILIES:  # loaded before any test runs the CLI: transformers' load-time warnings go to the
        built[name]  # session's stderr, not to a test's captured (and later closed) one
    return built
