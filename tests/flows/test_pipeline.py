"""The pipeline flow against a real (temporary) Prefect API: outcomes, failures, artifacts."""

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from flows import pipeline_stages
from flows.pipeline import pipeline


@pytest.fixture
def config(tmp_path):
    return PipelineConfig(out=str(tmp_path / "run"))


def test_a_stage_whose_inputs_were_never_made_is_blocked_not_run(prefect_api, config):
    config.stages = ["vocab"]

    outcomes = pipeline(config)

    assert outcomes["vocab"]["status"] == "blocked"
    assert outcomes["vocab"]["reason"] == "needs reconstruct (not selected)"
    assert not config.layout.vocab.exists()
    assert outcomes["generate"]["status"] == "not selected"


def test_a_stage_not_in_the_code_base_is_reported_not_built_and_its_dependents_blocked(
        prefect_api, config, monkeypatch):
    real = pipeline_stages.load_stage_flow
    monkeypatch.setattr(pipeline_stages, "load_stage_flow",  # simulate a checkout without reconstruct
                        lambda name: None if name == "reconstruct" else real(name))
    config.stages = ["reconstruct", "vocab", "extract"]

    outcomes = pipeline(config)

    assert outcomes["reconstruct"]["status"] == "not built"
    assert "flows/reconstruct.py" in outcomes["reconstruct"]["reason"]
    assert outcomes["vocab"] == {**outcomes["vocab"], "status": "blocked", "reason": "needs reconstruct (not built)"}
    assert outcomes["extract"]["status"] == "blocked"


def test_a_failed_stage_fails_the_run_with_the_stages_own_error(prefect_api, config):
    config.stages = ["generate"]  # no prompts: the generate stage refuses, with its own message

    state = pipeline(config, return_state=True)

    assert state.is_failed()
    assert "generate needs prompts" in state.message
    with pytest.raises(ConfigError, match="generate needs prompts"):
        state.result()
    assert "| generate | failed |" in summary_of(state)


def test_every_run_leaves_a_keyed_summary_artifact(prefect_api, config):
    config.stages = ["vocab"]
    state = pipeline(config, return_state=True)

    assert "| vocab | blocked |" in summary_of(state)


def summary_of(state) -> str:
    """The run's one `pipeline-summary` artifact."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["pipeline-summary"])))
    mine = [a for a in artifacts if a.flow_run_id == state.state_details.flow_run_id]
    assert len(mine) == 1
    return mine[0].data


def test_the_flow_parameter_is_the_pipeline_config_so_the_ui_renders_it_as_a_form():
    schema = pipeline.parameters.model_dump()
    assert list(schema["properties"]) == ["config"]
    assert schema["definitions"]["PipelineConfig"]["properties"]["generate"]
