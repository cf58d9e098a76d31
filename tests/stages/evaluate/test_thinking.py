"""Thinking on and off with the same drafter and prompts (``evaluate/thinking.py``), and the lossless check
beside each: the modes come from the recipe's switch, and each is its own pass on the servers evaluate
already starts.

The stage runs against the stand-in vLLM of ``tests/stages/evaluate/standin_vllm.py`` (started by the stage like
the real one): it drafts wholly wrong when a request turns thinking off, so each mode's figures can only
come from its own pass. Real vLLM's figures are tests/stages/evaluate/test_vllm.py's.
"""

import json
from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.stage import run_evaluate
from eagle3_core.stages.evaluate.thinking import thinking_modes, trained_in
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import RecordingReporter
from tests.stages.evaluate.standin_vllm import standin_vllm

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
# vLLM (the stand-in) with and without the drafter, one timed pass each, no offline pass: k = 2
ONLINE = dict(online=True, offline=False, by_context=False, max_tokens=10, num_speculative_tokens=2, k_sweep=[2])
ONLINE |= dict(baseline=True, warmup=False, speed_repeats=1)
SWITCH = {"kwarg": "enable_thinking", "default": True}


def recipe_target(name: str) -> TargetConfig:
    return PipelineConfig.from_yaml(CONFIGS / name).target


def test_a_recipe_with_a_switch_is_measured_thinking_on_and_off_by_default():
    modes = thinking_modes(EvaluateConfig(), recipe_target("qwen3.yaml"))
    assert [(m.name, m.chat.chat_template_kwargs) for m in modes] == [
        ("on", {"enable_thinking": True}),
        ("off", {"enable_thinking": False}),
    ]


def test_a_switch_whose_values_are_words_sends_the_words_that_mean_on_and_off():
    modes = thinking_modes(EvaluateConfig(), recipe_target("minimax-m3.yaml"))
    assert [m.chat.chat_template_kwargs["thinking_mode"] for m in modes] == ["enabled", "disabled"]


def test_a_target_without_a_switch_is_measured_as_its_recipe_says_and_asking_for_a_mode_is_one_error():
    toy = recipe_target("toy.yaml")
    assert thinking_modes(EvaluateConfig(), toy) == []
    with pytest.raises(ConfigError) as raised:
        thinking_modes(EvaluateConfig(thinking=["off"]), toy)
    assert "no thinking switch that turns thinking off" in raised.value.message
    assert "evaluate.thinking" in raised.value.fix


def test_a_mode_named_twice_is_refused():
    with pytest.raises(ValueError, match="names a mode twice"):
        EvaluateConfig(thinking=["on", "on"])


def test_the_mode_trained_in_is_what_generate_recorded_else_the_recipes(tmp_path):
    target = recipe_target("qwen3.yaml")
    assert trained_in(target, None) == "on"
    from eagle3_core.run.manifest import StageManifest, write_manifest

    off = {"chat": {"chat_template_kwargs": {"enable_thinking": False}}}  # as generate records it, by its writer
    write_manifest(tmp_path, StageManifest(stage="generate", status="complete", config_hash="h", details=off))
    assert trained_in(target, tmp_path) == "off"
    hybrid = recipe_target("minimax-m3.yaml").model_copy(
        update={"chat": target.chat.model_copy(update={"chat_template_kwargs": {}})}
    )
    assert trained_in(hybrid, None) == "model decides"


def test_each_mode_is_its_own_pass_on_the_same_two_servers_with_its_own_figures(
    chat_target, chat_export, tmp_path, monkeypatch
):
    serve = standin_vllm(tmp_path, monkeypatch, per_request_steps=True)
    monkeypatch.setenv("STANDIN_REQUESTS", str(tmp_path / "requests.jsonl"))
    target = TargetConfig(
        path=str(chat_target), thinking=SWITCH, chat={"chat_template_kwargs": {"enable_thinking": True}}
    )
    reporter = RecordingReporter()
    manifest = run_evaluate(EvaluateConfig(**ONLINE), target, chat_export, tmp_path / "eval", serve, reporter=reporter)
    assert manifest.status == "complete"
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    # the manifest's headline (the CLI's last line and the run summary read it) carries both modes and the lossless line
    assert manifest.details["acceptance_by_thinking"] == {"on": 2.0, "off": 1.0}
    assert manifest.details["lossless"].startswith("Lossless (greedy): 0 of 4 outputs identical")

    # two servers (with the drafter, then without), each sent the four prompts once per mode: "on" is the
    # recipe's own settings, so the headline pass stands for it; "off" is one more pass on each
    sent = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [(r["speculative"], r["chat_template_kwargs"]["enable_thinking"]) for r in sent] == (
        [(True, True)] * 4 + [(True, False)] * 4 + [(False, True)] * 4 + [(False, False)] * 4
    )
    assert len(list(Path(serve.log_dir).glob("*.log"))) == 2  # no server started for a mode
    block = report["thinking"]
    assert (block["switch"], block["trained_in"], list(block["modes"])) == ("enable_thinking", "on", ["on", "off"])
    on, off = block["modes"]["on"], block["modes"]["off"]
    assert on["acceptance_length"] == report["online"]["with_drafter"]["acceptance_length"] == 2.0  # 1 + k/2
    assert off["acceptance_length"] == 1.0 and off["chat_template_kwargs"] == {"enable_thinking": False}
    assert on["per_request"]["acceptance_length"] == 2.0 and off["per_request"]["acceptance_length"] == 1.0
    # the stand-in's answers with the drafter stop where its two steps end (k + 3 tokens thinking on, 3 off), its
    # answers without run to 8: each pair parts where the drafted one stopped short, as a drafter that shortens
    # its target's outputs would be caught
    for mode, short in ((on, 5), (off, 3)):
        greedy = mode["lossless"]["greedy"]
        assert (greedy["compared"], greedy["identical"], greedy["differing"]) == (4, 0, 4)
        assert {(d["position"], d["with_drafter"]) for d in greedy["first_differences"]} == {(short, None)}
    assert report["online"]["lossless"] == on["lossless"]  # the headline pass is the recipe's mode, "on"
    assert on["lossless"]["output_hash"]["with_drafter"] != off["lossless"]["output_hash"]["with_drafter"]

    md = (tmp_path / "eval" / "report.md").read_text()
    assert "## Thinking on and off (`enable_thinking`; the drafter was trained with thinking on)" in md
    assert "| off | 1.000 | 0.00, 0.00 |" in md
    assert (
        "Lossless (greedy): 0 of 4 outputs identical with and without the drafter; first differences: prompt 0 at token 5"
        in md
    )
    card = (chat_export / "README.md").read_text()
    assert "Thinking on and off (`enable_thinking`, same drafter and prompts; trained with thinking on)" in card
    assert "| off | 1 | 0, 0 |" in card and "Lossless (greedy): 0 of 4 outputs identical" in card
