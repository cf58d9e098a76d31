"""`eagle3 pipeline` and `eagle3 demo` as a user types them."""

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from flows.cli import cli

EAGLE3 = [sys.executable, "-c", "from flows.cli import main; main()"]


def test_a_recipe_mistake_is_one_message_naming_the_field_and_exit_2(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("stages: [generate, train]\ntrain:\n  ttt_stepz: 3\n")

    result = subprocess.run([*EAGLE3, "pipeline", "--config", str(recipe)], capture_output=True, text=True)

    assert result.returncode == 2
    assert "train.ttt_stepz" in result.stderr and str(recipe) in result.stderr
    assert "Traceback" not in result.stderr


def test_pipeline_prints_each_stage_outcome_the_outputs_and_the_headline(prefect_api, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("stages: [vocab]\n")

    result = CliRunner().invoke(cli, ["pipeline", "--config", str(recipe), "--out", str(tmp_path / "run")])

    assert result.exit_code == 0, result.output
    assert "vocab         blocked" in result.output
    assert f"generations          {tmp_path / 'run' / 'generations'}  (not written)" in result.output
    assert "acceptance length" in result.output


def test_demo_without_its_recipe_says_how_to_get_it(monkeypatch, tmp_path):
    from flows.cli import demo

    monkeypatch.setattr(demo, "TOY_RECIPE", Path(tmp_path / "missing.yaml"))

    result = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path / "run")])

    assert "the toy recipe is missing" in str(result.exception)


def test_every_declared_stage_has_its_command_listed_in_dag_order_before_the_other_commands():
    from eagle3_core.stages import STAGE_NAMES

    assert list(cli.commands) == [*STAGE_NAMES, "pipeline", "demo", "serve", "probe"]
