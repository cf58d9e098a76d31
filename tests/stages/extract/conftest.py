import pytest

from tests.stages.extract.helpers import build_tiny_llama


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """A 6-layer random Llama (H = 64, vocab 256): default layers are (2, 3, 3), so tests pass layers."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "model")
