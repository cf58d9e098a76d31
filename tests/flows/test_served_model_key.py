"""A target the pipeline serves itself is known to generate's key by its bytes: the same weights at
another path reuse their answers, other weights under the same path or served name are asked
again, and the key is known without starting vLLM (a rerun with nothing to do starts none)."""

import shutil

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.stage import stage_keys
from flows.pipeline import with_served_model

DEAD = "http://127.0.0.1:9/v1"  # nothing listens there: a key that asked it would fail


def model_dir(path, weights: bytes):
    """A model folder: the same config and tokenizer as every other here, these weights."""
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 4}')
    (path / "tokenizer.json").write_text('{"model": {"type": "BPE"}}')
    (path / "model.safetensors").write_bytes(weights)
    return path


def served_key(tmp_path, target, **serve) -> str:
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n')
    config = PipelineConfig(
        out=str(tmp_path / "run"),
        stages=["generate"],
        serve=ServeConfig(**serve),
        target={"path": str(target)},
        generate=GenerateConfig(prompts={"input": str(tmp_path / "prompts.jsonl")}),
    )
    generate = with_served_model(config).generate
    return stage_keys(generate.model_copy(update={"base_urls": [DEAD]}))[0]  # as the served stage runs it


def test_a_served_target_is_keyed_by_its_bytes_not_by_its_path_nor_its_served_name(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    first = model_dir(tmp_path / "models" / "target", b"weights of A" * 100)
    moved = shutil.copytree(first, tmp_path / "elsewhere" / "target-copy")
    other = model_dir(tmp_path / "models" / "other", b"weights of B" * 100)

    key = served_key(tmp_path, first)

    assert served_key(tmp_path, moved) == key  # moved or re-spelt: the same answers
    assert served_key(tmp_path, str(first) + "/") == key
    assert served_key(tmp_path, first, served_model_name="renamed") == key  # a name is no model
    assert served_key(tmp_path, other) != key  # other weights: asked again
    (first / "model.safetensors").write_bytes(b"weights of C" * 100)  # retrained in place
    assert served_key(tmp_path, first) != key


def test_a_target_path_that_is_no_folder_is_refused_before_any_stage(tmp_path):
    with pytest.raises(ConfigError) as error:
        served_key(tmp_path, tmp_path / "missing")
    assert "target.path is not a model directory" in error.value.message and "target.path" in error.value.fix


def test_without_serve_the_recipe_is_left_as_it_is(tmp_path):
    config = PipelineConfig(out=str(tmp_path / "run"), target={"path": str(tmp_path)})
    assert with_served_model(config) is config


def test_endpoints_the_recipe_names_are_keyed_by_what_they_serve_not_by_the_local_bytes(tmp_path):
    """``serve`` and ``generate.base_urls``: the named endpoints answer (not a vLLM of ``target.path``), so the
    key holds no fingerprint of the local folder; the stage names the model from the endpoints."""
    config = PipelineConfig(
        out=str(tmp_path / "run"),
        serve=ServeConfig(),
        target={"path": str(model_dir(tmp_path / "target", b"weights" * 10))},
        generate=GenerateConfig(base_urls=[DEAD]),
    )
    assert with_served_model(config) is config
