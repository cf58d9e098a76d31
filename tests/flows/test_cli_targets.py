"""Every command that takes a target takes its recipe: ``--family``/``--recipe`` bring the family's
parsers, tokenizer mode and token facts, ``--trust-remote-code`` the remote-code switch, and a
target given by its path alone takes no family's values (a Llama evaluated from the command line
was served with Kimi's reasoning parser)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle3_core.config import PipelineConfig

ROOT = Path(__file__).resolve().parents[2]


class Stop(Exception):
    """Raised in place of running the stage: the test needs only what the command built."""


def built_target(monkeypatch, tmp_path, command: str, *extra: str):
    """The TargetConfig ``eagle3 COMMAND`` hands its stage, given ``extra`` options."""
    module = importlib.import_module(f"flows.cli.{command}")
    seen = {}

    def capture(name, **arguments):
        seen.update(arguments)
        raise Stop

    monkeypatch.setattr(module, "run_stage", capture)
    if command == "extract":  # it reads its input folder first
        monkeypatch.setattr("eagle3_core.contracts.sequences.parts", lambda folder: [])
    folders = {
        "reconstruct": ["--input", "g", "--tokenizer", "t", "--out", "o"],
        "vocab": ["--input", "s", "--tokenizer", "t", "--out", "o"],
        "extract": ["--input", "s", "--target", "t", "--out", "o"],
        "train": ["--input", str(tmp_path / "hidden"), "--target", "t", "--out", "o", "--mode", "offline"],
        "evaluate": ["--target", "t", "--drafter", "d", "--out", "o", "--input", "p.jsonl"],
    }[command]
    result = CliRunner().invoke(module.command, [*folders, *extra], catch_exceptions=True)
    assert isinstance(result.exception, Stop), result.output
    return seen["target"]


COMMANDS = ["reconstruct", "vocab", "extract", "train", "evaluate"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_recipe_brings_the_familys_facts_to_the_stage(monkeypatch, tmp_path, command):
    target = built_target(monkeypatch, tmp_path, command, "--recipe", str(ROOT / "configs" / "deepseek-v4.yaml"))
    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "deepseek-v4.yaml").target
    assert target.path == "t" or target.path.endswith("t")
    assert (target.family, target.reasoning_parser, target.tokenizer_mode) == (
        recipe.family,
        recipe.reasoning_parser,
        recipe.tokenizer_mode,
    )
    assert target.think_open_id == recipe.think_open_id and not target.trust_remote_code


@pytest.mark.parametrize("command", COMMANDS)
def test_a_target_given_by_path_alone_takes_no_familys_parser(monkeypatch, tmp_path, command):
    target = built_target(monkeypatch, tmp_path, command)
    assert target.family is None and target.reasoning_parser is None and target.tool_parser is None


@pytest.mark.parametrize("command", COMMANDS)
def test_remote_code_runs_only_on_the_flag(monkeypatch, tmp_path, command):
    kimi = ["--family", "kimi_k2_5"]
    assert not built_target(monkeypatch, tmp_path, command, *kimi).trust_remote_code
    assert built_target(monkeypatch, tmp_path, command, *kimi, "--trust-remote-code").trust_remote_code


def test_evaluate_takes_the_recipes_parser_unless_one_is_given(monkeypatch, tmp_path):
    qwen = ["--family", "qwen3"]
    assert built_target(monkeypatch, tmp_path, "evaluate", *qwen).reasoning_parser == "qwen3"
    given = built_target(monkeypatch, tmp_path, "evaluate", *qwen, "--reasoning-parser", "deepseek_r1")
    assert given.reasoning_parser == "deepseek_r1"
    assert built_target(monkeypatch, tmp_path, "evaluate", *qwen, "--reasoning-parser", "none").reasoning_parser is None


def test_train_keeps_the_recipes_layers_unless_given(monkeypatch, tmp_path):
    toy = ["--recipe", str(ROOT / "configs" / "toy.yaml")]
    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "toy.yaml").target
    assert built_target(monkeypatch, tmp_path, "train", *toy).aux_layer_ids == recipe.aux_layer_ids
    assert built_target(monkeypatch, tmp_path, "train", *toy, "--layers", "1,2,3").aux_layer_ids == [1, 2, 3]


def served_target(monkeypatch, tmp_path, *extra: str):
    """The TargetConfig ``eagle3 serve`` starts vLLM for, given ``extra`` options."""
    from eagle3_core.serve.vllm_server import VLLMServer
    from flows.cli import serve

    seen = {}

    def capture(target, cfg, **kwargs):
        seen["target"] = target
        raise Stop

    monkeypatch.setattr(VLLMServer, "for_target", capture)
    (tmp_path / "model").mkdir(exist_ok=True)
    result = CliRunner().invoke(serve.command, ["--model", str(tmp_path / "model"), *extra], catch_exceptions=True)
    assert isinstance(result.exception, Stop), result.output
    return seen["target"]


def test_eagle3_serve_runs_a_models_own_code_only_on_the_flag_or_its_recipe(monkeypatch, tmp_path):
    assert not served_target(monkeypatch, tmp_path).trust_remote_code
    assert served_target(monkeypatch, tmp_path, "--trust-remote-code").trust_remote_code
    trusting = tmp_path / "kimi.yaml"
    recipe = (
        (ROOT / "configs" / "kimi-k2.5.yaml").read_text().replace("trust_remote_code: false", "trust_remote_code: true")
    )
    trusting.write_text(recipe)
    target = served_target(monkeypatch, tmp_path, "--config", str(trusting))
    assert target.trust_remote_code and target.reasoning_parser == "kimi_k2"
