"""Evaluate's passes that load the target never cost vLLM's figure: a target too large for this machine,
a tokenizer without a chat template and a pass that fails are each a reason in the report.

vLLM is the stand-in of ``tests/stages/evaluate/standin_vllm.py`` (started by the stage like the real one, no
model loaded): these tests are about what evaluate keeps and says, not about vLLM's figures.
"""

import json
import shutil

import pytest

from eagle3_core.errors import ConfigError, StageError
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.per_request import NOT_CARRIED
from eagle3_core.stages.evaluate.stage import run_evaluate
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import RecordingReporter
from tests.stages.evaluate.standin_vllm import standin_vllm

OFFLINE = dict(online=False, max_tokens=10, k_sweep=[1, 2], num_speculative_tokens=2, threads=1)
# vLLM (the stand-in) once, no baseline: its acceptance length is 1 + k/2 = 2.0 at k = 2
ONLINE = {**OFFLINE, "online": True, "baseline": False, "warmup": False, "speed_repeats": 1}


@pytest.fixture
def huge_target(chat_target, tmp_path):
    """The chat target (its tokenizer, prompts and tiny weights) whose config.json declares an MLP
    2^40 wide: petabytes in fp32, larger than any machine, and still the drafter's target (same
    hidden size, vocabulary and layers)."""
    target = shutil.copytree(chat_target, tmp_path / "huge")
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "intermediate_size": 2**40}))
    return target


@pytest.fixture
def templateless_target(chat_target, tmp_path):
    """The chat target with no chat template, as a tokenizer-mode family ships it (DeepSeek-V4:
    vLLM renders its prompts in Python)."""
    target = shutil.copytree(chat_target, tmp_path / "templateless")
    (target / "chat_template.jinja").unlink(missing_ok=True)
    tokenizer_config = json.loads((target / "tokenizer_config.json").read_text())
    tokenizer_config.pop("chat_template", None)
    (target / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return target


def evaluate(cfg: dict, target, export, tmp_path, serve=None) -> tuple[dict, RecordingReporter]:
    reporter = RecordingReporter()
    manifest = run_evaluate(
        EvaluateConfig(**cfg), TargetConfig(path=str(target)), export, tmp_path / "eval", serve, reporter=reporter
    )
    assert manifest.status == "complete"
    return json.loads((tmp_path / "eval" / "report.json").read_text()), reporter


def test_a_target_too_large_here_leaves_the_offline_passes_out_before_any_load_and_vllm_still_measures(
    huge_target, chat_export, tmp_path, monkeypatch
):
    report, reporter = evaluate(ONLINE, huge_target, chat_export, tmp_path, standin_vllm(tmp_path, monkeypatch))
    assert report["online"]["with_drafter"]["acceptance_length"] == 2.0  # vLLM's figure stands
    assert report["offline"] is None and report["by_context"] is None  # nor any per-request steps to take it from
    assert set(report["left_out"]) == {"offline", "by_context", "per_request"}
    reason = report["left_out"]["offline"]
    assert reason.startswith("the target's ") and " parameters need " in reason and "in float32 on the CPU" in reason
    plan = [i for i, line in enumerate(reporter.lines) if "left out, before any load" in line]
    started = [i for i, line in enumerate(reporter.lines) if "vLLM with the drafter (k=2) up" in line]
    assert len(plan) == 1 and plan[0] < started[0], reporter.lines  # one plan line, before vLLM even starts
    assert "the offline loop and the by-context replay left out" in reporter.lines[plan[0]]
    assert not [line for line in reporter.lines if "offline k=" in line]  # no pass ran
    assert f"- The offline loop was left out: {reason}." in (tmp_path / "eval" / "report.md").read_text()


def test_offline_only_on_a_target_too_large_is_one_error_naming_vllm_instead(huge_target, chat_export, tmp_path):
    with pytest.raises(ConfigError, match="evaluate's offline loop cannot load the target here: the target's") as err:
        run_evaluate(EvaluateConfig(**OFFLINE), TargetConfig(path=str(huge_target)), chat_export, tmp_path / "e", None)
    assert "evaluate.offline: false" in err.value.fix


def test_a_tokenizer_without_a_chat_template_runs_the_offline_passes_on_vllms_own_prompt_ids(
    templateless_target, chat_export, tmp_path, monkeypatch
):
    report, _ = evaluate(ONLINE, templateless_target, chat_export, tmp_path, standin_vllm(tmp_path, monkeypatch))
    assert report["left_out"] == {"per_request": NOT_CARRIED}  # the stand-in answers without vLLM's steps
    assert report["online"]["with_drafter"]["acceptance_length"] == 2.0
    assert report["offline"]["prompts"] == 4 and report["offline"]["drafts"] > 0
    assert report["by_context"]["source"] == "vllm" and report["by_context"]["answers"] == 4


def test_without_vllm_a_tokenizer_without_a_chat_template_is_one_line_saying_why_nothing_was_measured(
    templateless_target, chat_export, tmp_path
):
    with pytest.raises(StageError) as err:
        run_evaluate(
            EvaluateConfig(**OFFLINE), TargetConfig(path=str(templateless_target)), chat_export, tmp_path / "e", None
        )
    assert err.value.message == (
        "nothing measured the drafter: the offline loop was left out: the target's tokenizer has no chat template, "
        "so only the server's own prompt ids render the prompts as vLLM does, and vLLM did not run "
        "(evaluate.online: false)"
    )


def test_a_pass_that_fails_once_vllm_has_measured_is_a_reason_in_the_report_not_a_failed_stage(
    chat_target, chat_export, tmp_path, monkeypatch
):
    """The target's weights cut short: vLLM (the stand-in) never reads them, the offline loop does."""
    target = shutil.copytree(chat_target, tmp_path / "cut")
    weights = target / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    report, reporter = evaluate(ONLINE, target, chat_export, tmp_path, standin_vllm(tmp_path, monkeypatch))
    assert report["online"]["with_drafter"]["acceptance_length"] == 2.0
    assert report["offline"] is None and report["left_out"]["offline"].startswith("it failed (")
    assert report["left_out"]["by_context"].startswith("it failed (")
    assert f"evaluate: the offline loop left out: {report['left_out']['offline']}" in reporter.lines


def test_a_server_without_per_request_steps_is_one_warning_and_the_counters_and_replay_stand(
    chat_target, chat_export, tmp_path, monkeypatch
):
    """A server that answers without ``metrics.speculative_decoding`` (SGLang, a vLLM without the flag)."""
    report, reporter = evaluate(ONLINE, chat_target, chat_export, tmp_path, standin_vllm(tmp_path, monkeypatch))
    # a vLLM older than the flag would stop at it: it is started without (its engine arguments lack the field)
    assert "--per-request-spec-decode-metrics" not in report["online"]["engine"]["argv"]
    assert report["online"]["with_drafter"]["per_request"] is None
    assert report["left_out"] == {"per_request": NOT_CARRIED}
    assert [line for line in reporter.lines if "per-request" in line] == [f"evaluate warning: {NOT_CARRIED}"]
    assert report["online"]["with_drafter"]["acceptance_length"] == 2.0 and report["offline"]["drafts"] > 0
    assert report["by_context"]["source"] == "vllm"  # the replay, as before
    assert report["agreement"]["per_request_acceptance_length"] is None
    assert (
        f"- The per-request figure (vLLM's own verify steps) was left out: {NOT_CARRIED}."
        in (tmp_path / "eval" / "report.md").read_text()
    )


def test_a_target_too_large_here_takes_its_by_context_figure_from_vllms_own_steps(
    huge_target, chat_export, tmp_path, monkeypatch
):
    """The stand-in honours --per-request-spec-decode-metrics: two steps an answer, k kept then none."""
    serve = standin_vllm(tmp_path, monkeypatch, per_request_steps=True)
    report, reporter = evaluate(ONLINE, huge_target, chat_export, tmp_path, serve)
    argv = report["online"]["engine"]["argv"]
    assert argv[argv.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    steps = report["online"]["with_drafter"]["per_request"]
    assert (steps["requests"], steps["drafts"], steps["acceptance_length"]) == (4, 8, 2.0)
    assert steps["agreement_with_metrics"]["difference"] == 0.0
    assert [(r["label"], r["drafts"]) for r in steps["by_position"]] == [("0-256", 8)]
    assert steps["by_phase"] == {"answer": {"drafts": 8, "accepted_tokens": 8, "acceptance_length": 2.0}}
    block = report["by_context"]
    assert block["source"] == "vllm-per-request" and block["answers"] == 4 and block["difference_from_vllm"] == 0.0
    assert block["buckets"][0]["label"] == "0-512" and block["buckets"][0]["acceptance_length_by_k"] == {"2": 2.0}
    assert set(report["left_out"]) == {"offline", "by_context"}  # the replay did not run; its figure stands
    md = (tmp_path / "eval" / "report.md").read_text()
    assert "## vLLM's per-request acceptance (4 answers, 8 verify steps)" in md
    assert "| output position (tokens) | verify steps | acceptance length |\n|---|---|---|\n| 0-256 | 8 | 2.000 |" in md
    assert "| phase | verify steps | acceptance length |\n|---|---|---|\n| answer | 8 | 2.000 |" in md
    assert "## Acceptance by context length (k = 2, vLLM's own verify steps, 4 answers)" in md
    for png in ("acceptance_by_output_position.png", "acceptance_by_phase.png"):  # one chart each
        assert (tmp_path / "eval" / png).read_bytes().startswith(b"\x89PNG"), png
