"""Adding a stage is one package plus one declaration: a throwaway stage, ``lengths`` (the package
``tests/flows/lengths``), declared after reconstruct, runs through the pipeline, the CLI and its
own Prefect flow with nothing else written for it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from eagle3_core.config import PipelineConfig
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages import StageSpec, declare, undeclare
from tests.flows.lengths.config import LengthsConfig
from tests.prefect_reads import task_run_names
from tests.stages.extract.helpers import write_sequences

LENGTHS = StageSpec(
    "lengths",
    "lengths",
    lambda c: {"sequences_dir": "reconstruct"},
    lambda c: {},
    config=lambda c: LengthsConfig(min_tokens=3, label="pipeline"),
    unit="part",
    package="tests.flows.lengths",
)


@pytest.fixture
def lengths_declared():
    from flows.stages import stage_flow

    declare(LENGTHS, after="reconstruct")
    yield LENGTHS
    undeclare("lengths")
    stage_flow.cache_clear()


def test_the_declared_stage_joins_the_dag_the_recipes_and_the_summary(lengths_declared, tmp_path):
    from eagle3_core.run.summary import outputs

    config = PipelineConfig(out=str(tmp_path), stages=["reconstruct", "lengths"])
    assert [name for name in config.stages] == ["reconstruct", "lengths"]
    assert lengths_declared.reads(config) == ("reconstruct",)
    assert outputs(config)["lengths"] == tmp_path / "lengths"
    with pytest.raises(ValueError, match="unknown stage"):
        PipelineConfig(stages=["lenghts"])


def test_its_flow_is_built_with_its_typed_parameters_and_a_task_per_unit(prefect_api, lengths_declared, tmp_path):
    from flows.stages import stage_flow

    write_sequences(tmp_path / "seq", [[30, 2, 40], [12]])
    lengths = stage_flow("lengths")
    assert list(lengths.parameters.model_dump()["properties"]) == ["cfg", "sequences_dir", "out_dir"]

    manifest = lengths(
        cfg=LengthsConfig(min_tokens=3), sequences_dir=str(tmp_path / "seq"), out_dir=str(tmp_path / "l")
    )

    assert manifest.status == "complete" and manifest.counts == {"sequences": 3, "tokens": 82, "rejected": 1}
    assert manifest.details["reject_reasons"] == {"short": 1}
    assert {"lengths-part-00000", "lengths-part-00001"} <= task_run_names("lengths-part-")
    again = lengths(cfg=LengthsConfig(min_tokens=3), sequences_dir=str(tmp_path / "seq"), out_dir=str(tmp_path / "l"))
    assert again.updated_at == manifest.updated_at  # complete for these keys: skipped by the driver


def test_its_command_is_built_from_the_declaration_and_the_config_model(prefect_api, lengths_declared, tmp_path):
    from flows.cli import cli

    write_sequences(tmp_path / "seq", [[30, 2, 40]])
    help_text = CliRunner().invoke(cli, ["lengths", "--help"]).output
    assert "--sequences" in help_text and "--min-tokens" in help_text and "[default: 1; x>=1]" in help_text
    assert "lengths" in CliRunner().invoke(cli, ["--help"]).output

    args = ["lengths", "--sequences", str(tmp_path / "seq"), "--out", str(tmp_path / "l"), "--min-tokens", "5"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert f"lengths: complete; sequences 2, tokens 70, rejected 1 -> {tmp_path / 'l'}" in result.output


def test_the_pipeline_runs_it_after_the_stage_it_reads(prefect_api, lengths_declared, tmp_path):
    from flows.pipeline import pipeline
    from tests.flows.test_pipeline import one_generation, stage_graph, summary_of

    config = PipelineConfig(out=str(tmp_path / "run"), stages=["reconstruct", "lengths"])
    one_generation(config, tmp_path)

    state = pipeline(config, return_state=True)

    assert state.is_completed(), state.message
    assert state.result()["lengths"]["status"] == "ran"
    manifest = read_manifest(tmp_path / "run" / "lengths")
    assert manifest.status == "complete" and manifest.counts["sequences"] == 1
    assert stage_graph(state.state_details.flow_run_id) == {"reconstruct": set(), "lengths": {"reconstruct"}}
    assert "| lengths | ran |" in summary_of(state)
