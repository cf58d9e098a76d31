"""One tokenizer loader below every stage: a tokenizer that ships its own code loads only where the recipe allows it.

Kimi-K2.5's tokenizer is tiktoken code in the model folder (its recipe has ``trust_remote_code``).
evaluate once loaded the tokenizer with a bare ``AutoTokenizer.from_pretrained(path)`` and failed
its offline and by-context evaluation; the stand-in here is the toy's tokenizer behind an
``auto_map`` to a class in the folder, as Kimi's is. Each place that loads one is checked: reconstruct,
vocab, the pre-flight (each stopped just after its load, which is all that is under test here) and
evaluate.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.tokenizer import load_tokenizer
from tests.fixtures.toy import toy_recipe

CORE = Path(__file__).resolve().parents[2] / "eagle3_core"
CUSTOM = '''from transformers import PreTrainedTokenizerFast


class CustomTokenizer(PreTrainedTokenizerFast):
    """Stands for a tokenizer that ships its own code."""
'''
# the toy builder loads the tokenizer it has just trained and written itself
OWN_LOADER, TOY_BUILD = CORE / "target" / "tokenizer.py", CORE / "toy" / "build.py"


@pytest.fixture(scope="module")
def remote_code_tokenizer(toy_target, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("remote-code-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(toy_target / name, folder / name)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config |= {
        "tokenizer_class": "CustomTokenizer",
        "auto_map": {"AutoTokenizer": [None, "custom_tok.CustomTokenizer"]},
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "custom_tok.py").write_text(CUSTOM)
    return folder


def test_the_loader_runs_a_tokenizers_own_code_only_when_allowed(remote_code_tokenizer):
    with pytest.raises(ConfigError, match="ships its own code") as refused:
        load_tokenizer(remote_code_tokenizer, trust_remote_code=False)
    assert "target.trust_remote_code: true" in refused.value.fix
    assert type(load_tokenizer(remote_code_tokenizer, trust_remote_code=True)).__name__ == "CustomTokenizer"


def test_evaluate_renders_its_prompts_with_the_recipes_trust_remote_code(remote_code_tokenizer, toy_target):
    from eagle3_core.stages.evaluate.offline import prompt_token_ids

    prompts = [[{"role": "user", "content": "What is 2 + 3?"}]]
    with pytest.raises(ConfigError, match="ships its own code"):
        prompt_token_ids(remote_code_tokenizer, prompts)
    assert prompt_token_ids(remote_code_tokenizer, prompts, trust_remote_code=True) == prompt_token_ids(
        toy_target, prompts
    )


class Loaded(Exception):
    """Raised by the step after a stage's load, carrying the tokenizer's class name."""


def _stop_after_load(monkeypatch, where: str) -> None:
    """Replace the function a stage calls with its freshly loaded tokenizer (``where``, dotted) by a stop."""

    def stop(*args, **kwargs):
        tokenizer = next(a for a in args if hasattr(a, "convert_tokens_to_ids"))
        raise Loaded(type(tokenizer).__name__)

    monkeypatch.setattr(where, stop)


def _reconstruct(target: TargetConfig, tmp_path: Path) -> None:
    from eagle3_core.stages.reconstruct.config import ReconstructConfig
    from eagle3_core.stages.reconstruct.stage import ReconstructStage

    ReconstructStage(ReconstructConfig(), target, str(tmp_path / "generations"), str(tmp_path / "out")).keys()


def _vocab(target: TargetConfig, tmp_path: Path) -> None:
    from eagle3_core.stages.vocab.config import VocabConfig
    from eagle3_core.stages.vocab.stage import build_vocab

    build_vocab(VocabConfig(), target, [], tmp_path / "vocab", None)


def _preflight(target: TargetConfig, tmp_path: Path) -> None:
    from eagle3_core.endpoint.config import RequestConfig
    from eagle3_core.preflight.suite import preflight

    preflight(target, RequestConfig(), "http://127.0.0.1:9/v1")


LOADERS = {  # each stage that loads a tokenizer, and the call that first uses what it loaded
    "reconstruct": (_reconstruct, "eagle3_core.stages.reconstruct.stage.token_facts"),
    "vocab": (_vocab, "eagle3_core.stages.vocab.stage.target_vocab_size"),
    "preflight": (_preflight, "eagle3_core.target.tokenizer.token_facts"),
}


@pytest.mark.parametrize("stage", sorted(LOADERS))
def test_each_stage_loads_its_tokenizer_with_the_recipes_trust_remote_code(
    stage, remote_code_tokenizer, tmp_path, monkeypatch
):
    run, first_use = LOADERS[stage]
    target = {**toy_recipe()["target"], "path": str(remote_code_tokenizer)}
    _stop_after_load(monkeypatch, first_use)
    with pytest.raises(ConfigError, match="ships its own code"):
        run(TargetConfig.model_validate(target), tmp_path)
    with pytest.raises(Loaded, match="^CustomTokenizer$"):
        run(TargetConfig.model_validate({**target, "trust_remote_code": True}), tmp_path)


def _calls_from_pretrained_on_a_tokenizer(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "from_pretrained":
            owner = node.func.value
            if isinstance(owner, ast.Name) and "Tokenizer" in owner.id:
                lines.append(node.lineno)
    return lines


def test_no_stage_loads_a_tokenizer_but_through_the_shared_loader():
    found = {
        str(path.relative_to(CORE)): lines
        for path in sorted(CORE.rglob("*.py"))
        if path not in (OWN_LOADER, TOY_BUILD) and (lines := _calls_from_pretrained_on_a_tokenizer(path))
    }
    assert found == {}, f"load tokenizers with eagle3_core.target.tokenizer.load_tokenizer (trust_remote_code): {found}"


def test_a_folder_is_loaded_once_a_process_until_one_of_its_files_changes(toy_target, tmp_path):
    folder = tmp_path / "tokenizer"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(toy_target / name, folder / name)
    first = load_tokenizer(folder)
    assert load_tokenizer(folder) is first and load_tokenizer(str(folder) + "/") is first
    # another template written into the folder: the next load reads it
    (folder / "chat_template.jinja").write_text("{% for m in messages %}[{{ m.content }}]{% endfor %}")
    changed = load_tokenizer(folder)
    assert changed is not first
    assert changed.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == "[hi]"
    # the code switch is part of what was loaded
    assert load_tokenizer(folder, trust_remote_code=True) is not changed
