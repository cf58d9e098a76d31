"""The pipeline flow against a real (temporary) Prefect API: outcomes, failures, artifacts."""

from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.generate.config import GenerateConfig
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


def test_a_failed_stage_fails_the_run_with_the_stages_own_error(prefect_api, config, tmp_path):
    from eagle3_core.errors import InputError
    from eagle3_core.generate.config import PromptSource

    config.stages = ["generate"]  # prompts that are not there: the generate stage refuses, in its own words
    config.generate = config.generate.model_copy(update={
        "prompts": PromptSource(input=str(tmp_path / "missing.jsonl")), "base_urls": ["http://127.0.0.1:9/v1"]})

    state = pipeline(config, return_state=True)

    assert state.is_failed()
    assert "input not found" in state.message
    with pytest.raises(InputError, match="input not found"):
        state.result()
    assert "| generate | failed |" in summary_of(state)


def test_a_run_of_generate_without_prompts_is_refused_before_any_stage(prefect_api, config):
    config.stages = ["generate"]

    state = pipeline(config, return_state=True)

    assert state.is_failed()
    with pytest.raises(ConfigError, match="generate.prompts is not set"):
        state.result()


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


def test_an_api_key_reaches_no_log_artifact_parameter_or_manifest(prefect_api, config, tmp_path, make_fake_server,
                                                                  monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, LogFilter

    secret = "sk-eagle3-test-0123456789"
    monkeypatch.setenv("EAGLE3_TEST_KEY", secret)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n{"prompt": "Q2"}\n')
    config.stages = ["generate"]
    config.generate = GenerateConfig(prompts={"input": str(tmp_path / "prompts.jsonl")}, base_urls=[make_fake_server().url],
                                     api_key_env="EAGLE3_TEST_KEY", return_token_ids=False)

    state = pipeline(config, return_state=True)

    assert state.is_completed()
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
        logs = client.read_logs(log_filter=LogFilter())
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter())
    on_disk = [p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*.json")]
    seen = [str(run.parameters), *(log.message for log in logs), *(str(a.data) for a in artifacts), *on_disk]
    assert all(secret not in text for text in seen)


def test_every_built_stage_flow_accepts_the_arguments_the_pipeline_passes(tmp_path):
    import inspect

    recipe = Path(__file__).resolve().parents[2] / "configs" / "toy.yaml"
    config = PipelineConfig.from_yaml(recipe).model_copy(update={"out": str(tmp_path)})
    for name, stage in pipeline_stages.STAGES.items():
        stage_flow = pipeline_stages.load_stage_flow(name)
        if stage_flow is not None:
            inspect.signature(stage_flow.fn).bind(**stage.arguments(config, config.layout))


def test_the_toy_target_fills_the_target_path_and_its_prompts(tmp_path):
    from flows.pipeline import with_toy_paths

    config = PipelineConfig.model_validate({"evaluate": {"prompts": {"input": "{toy}/prompts_heldout.jsonl",
                                                                     "max_samples": 100}}})

    filled = with_toy_paths(config, "/cache/toy/abc")

    assert filled.target.path == "/cache/toy/abc"
    assert filled.generate.prompts.input == "/cache/toy/abc/prompts_train.jsonl"
    assert (filled.evaluate.prompts.input, filled.evaluate.prompts.max_samples) == ("/cache/toy/abc/prompts_heldout.jsonl", 100)


def test_a_second_run_reuses_a_complete_generation_without_any_endpoint(prefect_api, config, tmp_path,
                                                                        make_fake_server):
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n')
    config.stages = ["generate"]
    config.generate = GenerateConfig(prompts={"input": str(tmp_path / "prompts.jsonl")},
                                     base_urls=[make_fake_server().url], return_token_ids=False)
    assert pipeline(config)["generate"]["status"] == "ran"

    config.generate = config.generate.model_copy(update={"base_urls": []})  # e.g. vLLM not started again
    again = pipeline(config)

    assert again["generate"]["status"] == "reused"
    assert again["generate"]["counts"]["accepted"] == 1
