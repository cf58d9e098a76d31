"""Fixtures of the reconstruct tests: the four family tokenizers, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reconstruct.families import FAMILIES, build_family_tokenizer


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory) -> dict[str, Path]:
    """family name -> a local tokenizer directory with the family's real special ids (~2 s)."""
    root = tmp_path_factory.mktemp("family-tokenizers")
    return {name: build_family_tokenizer(family, root / name) for name, family in FAMILIES.items()}


@pytest.fixture(scope="session")
def family_tokenizers(family_dirs):
    """family name -> the loaded transformers tokenizer."""
    from eagle3_core.reconstruct.tokenizer import load_tokenizer

    return {name: load_tokenizer(path) for name, path in family_dirs.items()}
