"""Every message says what is true and what exists in the mode it is shown in (issue 23, "Messages")."""

import re
from pathlib import Path

import pytest

from tests.cli_helpers import cli_error, error_line

ROOT = Path(__file__).resolve().parents[2]


def test_a_recipe_without_a_target_fails_before_the_first_stage_naming_the_recipe_field(tmp_path, capsys):
    import yaml

    recipe = yaml.safe_load((ROOT / "configs" / "qwen3.yaml").read_text())
    assert recipe["target"].get("path") is None  # as shipped: the user sets it
    recipe.setdefault("generate", {})["prompts"] = {"input": str(tmp_path / "prompts.jsonl")}
    recipe["out"] = str(tmp_path / "run")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))

    err = cli_error(["pipeline", "--config", str(tmp_path / "recipe.yaml")], capsys)

    assert error_line(err).startswith("error: target.path is not set, and the selected stages ")
    assert "set target.path in the recipe" in err and "--tokenizer" not in err
    assert not (tmp_path / "run").exists()  # no stage ran


def test_a_spool_budget_too_small_shows_what_was_given_and_a_figure_that_holds_it():
    from eagle3_core.errors import ConfigError
    from eagle3_core.spool.folder import Requests, Unit

    given = int(0.004 * 2**30)  # shown as 0.00 GiB before
    unit = Unit(sample_ids=["a"], parts=["part-00000.parquet"], rows=[0], tokens=[6_400], pinned=False)
    requests = Requests(
        run_id="r", sequences_dir="s", target_path="t", layers=[1, 2, 3], hidden_size=128, num_hidden_layers=4,
        budget_bytes=given, consumers=1, units=[unit],
    )  # fmt: skip

    with pytest.raises(ConfigError) as error:
        requests.check()

    need = 2 * requests.unit_size(0)  # one micro-batch per consumer plus one
    assert 0.012 < need / 2**30 < 0.0125  # which rounded down to 0.01: still too small
    assert "the spool budget (0.004 GiB)" in error.value.message
    at_least = float(re.search(r"spool_gb to at least ([0-9.]+)", error.value.fix).group(1))
    assert at_least * 2**30 >= need


def test_train_offers_every_mode_the_config_has_and_its_endpoint_takes_a_url():
    import typing

    from eagle3_core.stages.train.config import TrainConfig
    from flows.cli.train import command

    options = {o.name: o for o in command.params}
    assert list(options["mode"].type.choices) == list(typing.get_args(TrainConfig.model_fields["mode"].annotation))
    assert options["endpoint"].type.name == "text" and "http://HOST:PORT" in options["endpoint"].help


def test_no_form_description_loses_a_placeholder_to_the_uis_html():
    """The Prefect UI renders a description as markdown: a bare `<date>` is an HTML tag, and vanished
    (`toy.cache_dir` read "under toy//"). Inside backticks it is code, shown as written."""
    from eagle3_core.stages import STAGE_NAMES
    from flows.nightly import nightly
    from flows.pipeline import pipeline
    from flows.stages import stage_flow

    lost = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "description" and isinstance(value, str):
                    if re.search(r"<[^\s=<]", re.sub(r"`[^`]*`", "", value)):
                        lost.add(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for flow in [pipeline, nightly, *(stage_flow(name) for name in STAGE_NAMES)]:
        walk(flow.parameters.model_dump())
    assert lost == set()


def test_the_pipeline_flow_refuses_a_recipe_without_a_target_before_its_first_stage(prefect_api, tmp_path):
    from eagle3_core.config import PipelineConfig
    from flows.pipeline import pipeline

    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n')
    config = PipelineConfig.model_validate(
        {"out": str(tmp_path / "run"), "generate": {"prompts": {"input": str(tmp_path / "prompts.jsonl")}}}
    )

    state = pipeline(config, return_state=True)

    assert state.is_failed() and "target.path is not set" in state.message
    assert not (tmp_path / "run" / "generations").exists()  # generate did not run first
