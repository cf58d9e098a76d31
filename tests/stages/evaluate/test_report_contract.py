"""report.json through its typed model (``eagle3_core/contracts/evaluation.py``): the stage writes the same bytes
its dict made before the model existed, and a report written before a block existed still reads.

The proof runs the stage (the stand-in vLLM of ``standin_vllm.py``, the tiny chat target) and keeps the dict
it handed to ``write_report``: report.json must be that dict as ``json.dumps`` wrote it before (the definitions
and the agreement added, ``report_object``), byte for byte, and read back it must be the same report. Each case reaches
blocks the others do not, and asserts it did, so no case passes on a report with the blocks left out.
"""

import json
import shutil

import pytest
from pydantic import ValidationError

from eagle3_core.contracts.evaluation import EvaluationReport
from eagle3_core.drafter.card import CARD_FILE, read_meta, update_card
from eagle3_core.drafter.kinds import KINDS
from eagle3_core.errors import InputError
from eagle3_core.run.layout import RunLayout
from eagle3_core.run.summary import headline
from eagle3_core.stages.evaluate import report as report_module
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.stage import run_evaluate
from eagle3_core.target.config import TargetConfig
from tests.stages.evaluate.standin_vllm import standin_vllm
from tests.stages.evaluate.test_stage import refusing_vllm

OFFLINE = dict(online=False, max_tokens=10, k_sweep=[1, 2], num_speculative_tokens=2, threads=1)
ONLINE = {**OFFLINE, "online": True, "baseline": True, "warmup": False, "speed_repeats": 2}
SWITCH = {"kwarg": "enable_thinking", "default": True}
SWITCH_ON = {"enable_thinking": True}


def legacy_bytes(report: dict) -> str:
    """report.json as evaluate wrote it before the model: its dict, through ``write_json_atomic``'s dumps."""
    return json.dumps(report_module.report_object(report), indent=2, sort_keys=False, default=str) + "\n"


def evaluate(tmp_path, monkeypatch, chat_target, chat_export, cfg: dict, serve=None, thinking=False) -> dict:
    """Run the stage on a copy of the export (a training metrics file beside it: the simulated block); the dict
    it handed to write_report."""
    handed = []
    real = report_module.write_report

    def keep(out_dir, report):
        handed.append(report)
        return real(out_dir, report)

    monkeypatch.setattr("eagle3_core.stages.evaluate.stage.write_report", keep)
    export = shutil.copytree(chat_export, tmp_path / "drafter" / "export")
    (tmp_path / "drafter" / "metrics.jsonl").write_text('{"step": 4, "split": "heldout", "acc_k": [0.5, 0.25]}\n')
    target = TargetConfig(path=str(chat_target))
    if thinking:
        target = TargetConfig(path=str(chat_target), thinking=SWITCH, chat={"chat_template_kwargs": SWITCH_ON})
    manifest = run_evaluate(EvaluateConfig(**cfg), target, export, tmp_path / "eval", serve)
    assert manifest.status == "complete" and len(handed) == 1
    return handed[0]


def assert_written_as_before(tmp_path, report: dict) -> None:
    """report.json is the stage's dict byte for byte; read back, it is the report the stage rendered report.md from."""
    assert (tmp_path / "eval" / "report.json").read_text() == legacy_bytes(report)
    read_back = EvaluationReport.read(tmp_path / "eval" / "report.json")
    assert read_back.dump() == json.loads(legacy_bytes(report))
    assert (tmp_path / "eval" / "report.md").read_text() == report_module.render_markdown(read_back)


def test_an_online_report_with_every_block_is_written_byte_for_byte_as_its_dict(
    chat_target, chat_export, tmp_path, monkeypatch
):
    serve = standin_vllm(tmp_path, monkeypatch, per_request_steps=True)
    report = evaluate(tmp_path, monkeypatch, chat_target, chat_export, ONLINE, serve, thinking=True)
    assert_written_as_before(tmp_path, report)
    # not vacuous: every block the readers take is in it, down to its leaves
    online, steps = report["online"], report["online"]["with_drafter"]["per_request"]
    assert online["without_drafter"] and online["lossless"]["greedy"]["first_differences"] and online["engine"]
    assert steps["by_position"] and steps["by_context"] and steps["spread"] and steps["agreement_with_metrics"]
    assert list(report["thinking"]["modes"]) == ["on", "off"] and report["thinking"]["modes"]["off"]["per_request"]
    assert report["offline"]["k_sweep"] and report["by_context"]["buckets"] and report["simulated"]["step_accuracies"]
    written = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert written["agreement"]["per_request_acceptance_length"] == 2.0 and written["definitions"]


def test_an_offline_report_is_written_byte_for_byte_as_its_dict(chat_target, chat_export, tmp_path, monkeypatch):
    report = evaluate(tmp_path, monkeypatch, chat_target, chat_export, OFFLINE)
    assert_written_as_before(tmp_path, report)
    assert report["online"] is None and report["offline"]["k_sweep"] and report["by_context"]["source"] == "offline"


def test_a_report_without_per_request_steps_or_a_baseline_is_written_byte_for_byte_as_its_dict(
    chat_target, chat_export, tmp_path, monkeypatch
):
    serve = standin_vllm(tmp_path, monkeypatch)  # a server without the flag: per_request left out
    cfg = {**ONLINE, "baseline": False, "by_context": False}
    report = evaluate(tmp_path, monkeypatch, chat_target, chat_export, cfg, serve)
    assert_written_as_before(tmp_path, report)
    assert report["online"]["with_drafter"]["per_request"] is None and set(report["left_out"]) == {"per_request"}
    assert report["online"]["without_drafter"] is None and report["online"]["lossless"]["not_compared"]
    assert "by_context" not in json.loads((tmp_path / "eval" / "report.json").read_text())  # absent, not null


def test_a_report_of_vllms_refusal_is_written_byte_for_byte_as_its_dict(
    chat_target, chat_export, tmp_path, monkeypatch
):
    serve = refusing_vllm(tmp_path, "eagle3 speculative decoding")
    report = evaluate(tmp_path, monkeypatch, chat_target, chat_export, {**OFFLINE, "online": True}, serve)
    assert_written_as_before(tmp_path, report)
    assert report["vllm_refusal"]["log"] and report["online"] is None and report["offline"]


def test_a_key_no_model_declares_is_refused_when_written():
    report = {"settings": {"num_speculative_tokens": 2, "temperature": 0.0}, "online": {"with_drafter": {}}}
    report["online"]["with_drafter"]["acceptance_lenght"] = 2.0
    with pytest.raises(ValidationError, match=r"online.with_drafter.acceptance_lenght\s+Extra inputs"):
        EvaluationReport.built(report)


# A report.json written before thinking, per_request, lossless, vllm_refusal, left_out, by_context and the engine
# existed, with a key since dropped: what the card and the summary must still read.
OLD_REPORT = {
    "settings": {"num_speculative_tokens": 3, "temperature": 0.0, "concurrency": 4, "max_tokens": 256},
    "heldout": {"source": "/data/heldout.jsonl", "prompts": 50, "skipped_rows": 0},
    "online": {
        "with_drafter": {"acceptance_length": 2.75, "acceptance_per_position": [0.8, 0.6, 0.35], "drafts": 400},
        "without_drafter": {"output_tokens_per_s": 40.0},
        "speedup": 1.6,
        "tokens_per_s_ratio": 1.6,  # dropped since
    },
    "offline": {"acceptance_length": 2.7, "acceptance_per_position": [0.8, 0.55, 0.35], "prompts": 50},
    "simulated": None,
    "definitions": {"acceptance_length": "1 + accepted / drafts"},
    "agreement": {"online_acceptance_length": 2.75, "offline_acceptance_length": 2.7, "difference": 0.05},
}


def test_a_report_written_before_the_newer_blocks_reads_through_the_card_and_the_summary(tmp_path):
    layout = RunLayout(root=tmp_path)
    layout.eval.mkdir(parents=True)
    (layout.eval / "report.json").write_text(json.dumps(OLD_REPORT))
    report = EvaluationReport.read(layout.eval / "report.json")
    assert report.per_request is None and report.lossless is None and report.modes == {} and report.left_out == {}
    assert report.by_context is None and report.vllm_refusal is None and report.online.engine is None

    figures = headline(layout)
    assert figures["acceptance length (vLLM)"] == 2.75 and figures["acceptance length (offline)"] == 2.7
    assert not {"acceptance by context", "acceptance by thinking mode", "lossless"} & set(figures)

    export = tmp_path / "export"
    export.mkdir()
    (export / "config.json").write_text(
        json.dumps({"architectures": [KINDS["eagle3"].architecture], "hidden_size": 64})
    )
    update_card(export, report)
    evaluation = read_meta(export / CARD_FILE)["evaluation"]
    assert (evaluation["k"], evaluation["vllm_acceptance_length"], evaluation["prompt_source"]) == (
        3,
        2.75,
        "heldout.jsonl",
    )
    assert evaluation["acceptance_measured_by"] == "vllm" and evaluation["lossless"] is None
    assert evaluation["vllm_command"] is None and evaluation["by_output_position"] is None


def test_a_report_of_another_shape_is_one_input_error_naming_the_key(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"online": {"with_drafter": {"acceptance_length": "high"}}}))
    with pytest.raises(InputError, match=r"report.json: online.with_drafter.acceptance_length: .*number"):
        EvaluationReport.read(path)
