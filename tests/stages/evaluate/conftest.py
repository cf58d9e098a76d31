"""Session fixtures of the evaluate tests: a tiny random target and a random drafter export."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stages.evaluate.models import make_export, make_target


@pytest.fixture(scope="session")
def tiny_target(tmp_path_factory) -> Path:
    return make_target(tmp_path_factory.mktemp("tiny-target"))


@pytest.fixture(scope="session")
def random_export(tiny_target, tmp_path_factory) -> Path:
    return make_export(tmp_path_factory.mktemp("random-export"), tiny_target)


@pytest.fixture(scope="session")
def chat_target(tmp_path_factory) -> Path:
    from tests.stages.evaluate.models import make_chat_target

    return make_chat_target(tmp_path_factory.mktemp("chat-target"))


@pytest.fixture(scope="session")
def chat_export(chat_target, tmp_path_factory) -> Path:
    return make_export(tmp_path_factory.mktemp("chat-export"), chat_target)
