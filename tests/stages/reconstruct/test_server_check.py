"""The server-id check: the match rate, and one warning line when too few rebuilt sequences match."""

from __future__ import annotations

from collections import Counter

import pytest
from click.testing import CliRunner

from eagle3_core.run.manifest import StageManifest
from eagle3_core.stages.reconstruct.server_check import server_check


def checked(matched: int, of: int, **counts) -> Counter:
    return Counter({"server_checked": of, "server_matched": matched, **counts})


def test_under_99_percent_the_check_warns_naming_the_rate_what_it_means_and_the_likely_cause():
    check = server_check(checked(17, 18, source_text=3), "server")

    assert check["match_rate"] == 0.944444
    warning = check["warning"]
    assert warning.startswith("reconstruct: warning: only 94.44% of 18 rebuilt sequences match the server's token ids")
    assert "(under 99%)" in warning and "\n" not in warning
    assert "a sequence built from text (3 here: records without ids) holds tokens the model did not produce" in warning
    assert "the recipe's tokenizer or chat template (--tokenizer, target.chat)" in warning


def test_training_on_the_text_is_named_as_training_on_tokens_the_model_did_not_produce():
    warning = server_check(checked(0, 4), "text")["warning"]
    assert (
        "only 0.00% of 4" in warning
        and "the tokens trained on (prefer: text) are not the ones the model produced" in warning
    )


@pytest.mark.parametrize(
    "counts",
    [
        checked(99, 100),  # one stray record in a hundred
        checked(0, 0),  # no server ids: nothing to judge
        checked(0, 4, server_repeated_think_close=4),  # only </think>s the parser dropped from the text
    ],
)
def test_no_warning_at_99_percent_without_ids_or_for_repeated_think_closes(counts):
    assert "warning" not in server_check(counts, "server")


def test_the_reconstruct_command_prints_the_warning_as_one_line_on_stderr(tmp_path, monkeypatch):
    from flows.cli import cli

    check = server_check(checked(17, 18), "server")
    manifest = StageManifest(
        stage="reconstruct",
        status="complete",
        config_hash="h",
        counts={"sequences": 18},
        details={"server_check": check, "reject_reasons": {}},
    )
    monkeypatch.setattr("flows.cli.reconstruct.run_stage", lambda name, **arguments: manifest)
    folders = ["--input", str(tmp_path / "gen"), "--tokenizer", str(tmp_path), "--out", str(tmp_path / "seq")]

    result = CliRunner().invoke(cli, ["reconstruct", *folders, "--family", "qwen3"])

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [check["warning"]]
    assert "server ids match: 94.44% of 18" in result.stdout
