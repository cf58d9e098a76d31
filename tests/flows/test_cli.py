"""`eagle3 pipeline` and `eagle3 demo` as a user types them."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from flows.cli import cli
from tests.cli_helpers import cli_error, error_line, prefect_console_to_current_stderr

EAGLE3 = [sys.executable, "-c", "from flows.cli import main; main()"]


def test_a_recipe_mistake_is_one_message_naming_the_field_and_exit_2(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("stages: [generate, train]\ntrain:\n  ttt_stepz: 3\n")

    result = subprocess.run([*EAGLE3, "pipeline", "--config", str(recipe)], capture_output=True, text=True)

    assert result.returncode == 2
    assert "train.ttt_stepz" in result.stderr and str(recipe) in result.stderr
    assert "Traceback" not in result.stderr


def test_pipeline_prints_each_stage_outcome_and_fails_when_a_selected_stage_was_blocked(
    prefect_api, tmp_path, capsys, monkeypatch
):
    from flows.cli import main

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"stages: [vocab]\ntarget: {{path: {tmp_path}}}\n")  # a target: only vocab's input is missing
    monkeypatch.setattr("sys.argv", ["eagle3", "pipeline", "--config", str(recipe), "--out", str(tmp_path / "run")])
    with prefect_console_to_current_stderr(), pytest.raises(SystemExit) as exit_info:
        main()
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert "vocab         blocked" in out
    assert f"generations          {tmp_path / 'run' / 'generations'}  (not written)" in out
    assert "acceptance length" in out
    assert error_line(err) == "error: 1 selected stage(s) did not run: vocab needs reconstruct (not selected)"


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("stages: [vocab]\ntrain:\n  lr: [1e-3\n")
    err = cli_error(["pipeline", "--config", str(recipe)], capsys)
    assert error_line(err).startswith(f"error: YAML syntax error at {recipe}:4:1:")


def test_a_recipe_that_runs_generate_without_prompts_is_refused_naming_the_recipe_field(tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("stages: [generate]\n")
    err = cli_error(["pipeline", "--config", str(recipe)], capsys)
    assert error_line(err) == "error: generate.prompts is not set, and the generate stage needs prompts"
    assert f"file: {recipe}" in err and "set generate.prompts.input in the recipe" in err


def test_demo_without_its_recipe_says_how_to_get_it(tmp_path):
    missing = tmp_path / "missing.yaml"

    result = CliRunner().invoke(cli, ["demo", "--recipe", str(missing), "--out", str(tmp_path / "run")])

    assert f"the toy recipe is missing: {missing}" in str(result.exception)


def test_demo_on_a_recipe_without_a_toy_section_says_which_recipes_it_runs(tmp_path):
    recipe = tmp_path / "served.yaml"
    recipe.write_text("target:\n  path: /models/mine\n")

    result = CliRunner().invoke(cli, ["demo", "--recipe", str(recipe)])

    assert f"{recipe} has no `toy:` section" in str(result.exception)
    assert "configs/toy-long.yaml" in result.exception.fix


def test_every_declared_stage_has_its_command_listed_in_dag_order_before_the_other_commands():
    from eagle3_core.stages import STAGE_NAMES

    assert list(cli.commands) == [*STAGE_NAMES, "pipeline", "demo", "serve", "probe"]


@pytest.mark.slow  # the flow starts an ephemeral Prefect API (~15 s)
@pytest.mark.prefect_server
def test_a_users_error_ends_the_output_nothing_prefect_logs_at_shutdown_follows_it(tmp_path):
    result = subprocess.run(
        [*EAGLE3, "vocab", "--input", str(tmp_path / "missing"), "--tokenizer", str(tmp_path), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 2, result.stderr
    assert error_line(result.stderr).startswith("error: no sequences found")  # and only its own lines after it


def test_train_mode_auto_is_a_choice_and_reads_hidden_only_when_extract_wrote_it(tmp_path):
    from eagle3_core.run.manifest import StageManifest, write_manifest
    from flows.cli.train import command, input_folders

    mode = next(p for p in command.params if p.name == "mode")
    assert "auto" in mode.type.choices
    write_manifest(tmp_path / "hidden", StageManifest(stage="extract", status="complete", config_hash="x"))
    write_manifest(tmp_path / "sequences", StageManifest(stage="reconstruct", status="complete", config_hash="x"))
    assert input_folders("auto", str(tmp_path / "hidden")) == (str(tmp_path / "hidden"), None)
    assert input_folders("auto", str(tmp_path / "sequences")) == (None, str(tmp_path / "sequences"))
    assert input_folders("offline", str(tmp_path / "x")) == (str(tmp_path / "x"), None)


def test_the_ephemeral_api_is_given_two_minutes_to_start_unless_the_user_gave_it_longer(monkeypatch):
    """Prefect's 20 s default ran out on a 2-core VM while the command's own imports shared the
    cores: `eagle3 evaluate` then failed before doing anything."""
    from prefect.server.api import server
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS as STARTUP

    from flows.cli import EPHEMERAL_STARTUP_S, watch_ephemeral_api

    monkeypatch.setattr(server, "subprocess", server.subprocess)  # put back after: the call swaps it
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(sys, "argv", ["eagle3", "evaluate"])
    # no API of the user's, in the environment or the settings (a test session's harness sets one)
    with temporary_settings(restore_defaults={STARTUP, PREFECT_API_URL}), watch_ephemeral_api():
        assert STARTUP.value() == EPHEMERAL_STARTUP_S == 120
    with temporary_settings(updates={STARTUP: 600}, restore_defaults={PREFECT_API_URL}), watch_ephemeral_api():
        assert STARTUP.value() == 600
