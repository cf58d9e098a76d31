"""evaluate_flow against a real (temporary) Prefect API, and `eagle3 evaluate`."""

from __future__ import annotations

import json

from click.testing import CliRunner

from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import cli_error
from tests.prefect_reads import artifacts
from tests.stages.evaluate.models import make_export, make_target


def test_the_flow_publishes_the_report_and_both_plots_as_artifacts(prefect_api, chat_target, chat_export, tmp_path):
    from flows.stages import stage_flow

    evaluate_flow = stage_flow("evaluate")

    cfg = EvaluateConfig(online=False, max_tokens=8, k_sweep=[1, 2], threads=1)
    manifest = evaluate_flow(
        cfg=cfg, target=TargetConfig(path=str(chat_target)), export_dir=str(chat_export), out_dir=str(tmp_path / "eval")
    )
    assert manifest.status == "complete"
    report = artifacts("evaluate-report")
    assert report and "# eagle3 evaluation" in report[0].data and "bonus token" in report[0].data
    plots = artifacts("evaluate-acceptance-per-position", "evaluate-acceptance-length-vs-k")
    assert len({a.key for a in plots}) == 2 and all("data:image/png;base64," in a.data for a in plots)


def test_the_command_prints_the_headline_and_writes_eval(prefect_api, chat_target, chat_export, tmp_path):
    from flows.cli import cli

    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "--target",
            str(chat_target),
            "--drafter",
            str(chat_export),
            "--out",
            str(tmp_path / "eval"),
            "--offline-only",
            "-k",
            "2",
            "--max-tokens",
            "8",
            "--max-samples",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "acceptance length (k=2, temperature 0.0, bonus token included): vLLM n/a, offline" in result.output
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["heldout"]["prompts"] == 2 and report["settings"]["num_speculative_tokens"] == 2


def test_a_mismatched_drafter_is_one_clear_error_without_a_traceback(prefect_api, chat_target, tmp_path, capsys):

    other = make_export(tmp_path / "export", make_target(tmp_path / "other", vocab_size=120))
    err = cli_error(
        ["evaluate", "--target", str(chat_target), "--drafter", str(other), "--out", str(tmp_path / "e")], capsys
    )
    assert "drafter was trained for a different target: vocab size is 120 in the drafter" in err
