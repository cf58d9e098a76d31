"""The pipeline flow against a real (temporary) Prefect API: outcomes, failures, artifacts."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError, StagesBlocked
from eagle3_core.stages import STAGE_NAMES, STAGES
from eagle3_core.stages.generate.config import GenerateConfig
from flows.pipeline import pipeline
from flows.stages import stage_flow
from tests.prefect_reads import artifacts, logs_since


@pytest.fixture
def config(tmp_path):
    return PipelineConfig(out=str(tmp_path / "run"))


def test_a_stage_whose_inputs_were_never_made_is_blocked_not_run_and_fails_the_flow_run(prefect_api, config, tmp_path):
    config.stages = ["vocab"]
    config.target.path = str(tmp_path)  # a target is there: only the stage's input is missing

    state = pipeline(config, return_state=True)

    assert state.is_failed()  # what the UI shows: a run that did not do all it was asked is not Completed
    assert "1 selected stage(s) did not run: vocab needs reconstruct (not selected)" in state.message
    with pytest.raises(StagesBlocked) as blocked:
        state.result()
    outcomes = blocked.value.outcomes
    assert outcomes["vocab"]["status"] == "blocked"
    assert outcomes["vocab"]["reason"] == "needs reconstruct (not selected)"
    assert not config.layout.vocab.exists()
    assert outcomes["generate"]["status"] == "not selected"


def test_a_failed_stage_fails_the_run_with_the_stages_own_error(prefect_api, config, tmp_path):
    from eagle3_core.errors import InputError
    from eagle3_core.prompts.source import PromptSource

    config.stages = ["generate"]  # prompts that are not there: the generate stage refuses, in its own words
    config.generate = config.generate.model_copy(
        update={"prompts": PromptSource(input=str(tmp_path / "missing.jsonl")), "base_urls": ["http://127.0.0.1:9/v1"]}
    )

    state = pipeline(config, return_state=True)

    assert state.is_failed()
    assert "input not found" in state.message
    with pytest.raises(InputError, match="input not found"):
        state.result()
    assert "| generate | failed |" in summary_of(state) and "input not found" in summary_of(state)
    # checked in its own subflow, so the run graph shows generate failed with its error
    failed, message = stage_states(state.state_details.flow_run_id)["generate"]
    assert failed == "FAILED" and "input not found" in message


def test_with_serve_an_input_the_stage_refuses_starts_no_server_and_fails_its_subflow(prefect_api, config, tmp_path):
    from eagle3_core.errors import InputError
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.serve.config import ServeConfig

    one_generation(config, tmp_path)  # a target folder for serve: to start, were it asked to
    config.stages, config.serve = ["generate"], ServeConfig()
    (tmp_path / "prompts.txt").write_text("Q1\n")  # refused by its keys, which say whether it would skip
    config.generate = config.generate.model_copy(update={"prompts": PromptSource(input=str(tmp_path / "prompts.txt"))})

    state = pipeline(config, return_state=True)

    with pytest.raises(InputError, match="unsupported input file type"):
        state.result()
    failed, message = stage_states(state.state_details.flow_run_id)["generate"]
    assert failed == "FAILED" and "unsupported input file type" in message
    assert "| generate | failed |" in summary_of(state) and "| serve |" not in summary_of(state)


def test_a_stages_input_checks_run_once_in_its_own_subflow(
    prefect_api, config, tmp_path, monkeypatch, make_fake_server
):
    from eagle3_core.stages.generate.stage import GenerateStage

    (tmp_path / "prompts.jsonl").write_text('{"prompt": "What is 2 + 2?"}\n')
    config.stages = ["generate"]
    config.generate = GenerateConfig(
        prompts={"input": str(tmp_path / "prompts.jsonl")}, base_urls=[make_fake_server().url], return_token_ids=False
    )
    checked = []
    keys = GenerateStage.keys
    monkeypatch.setattr(GenerateStage, "keys", lambda stage: checked.append(stage) or keys(stage))

    state = pipeline(config, return_state=True)

    assert state.is_completed(), state.message
    assert len(checked) == 1  # the pipeline built it and asked whether it would skip first: twice


def test_a_run_of_generate_without_prompts_is_refused_before_any_stage(prefect_api, config):
    config.stages = ["generate"]

    state = pipeline(config, return_state=True)

    assert state.is_failed()
    with pytest.raises(ConfigError, match="generate.prompts is not set"):
        state.result()
    assert f"# eagle3 pipeline: `{config.out}`" in summary_of(state)  # a refused run leaves its summary too


def test_a_recipe_without_endpoints_is_told_which_recipe_fields_to_set(prefect_api, config, tmp_path):
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n')
    config.stages = ["generate"]
    config.generate = GenerateConfig(prompts={"input": str(tmp_path / "prompts.jsonl")})

    state = pipeline(config, return_state=True)

    with pytest.raises(ConfigError, match="generate needs at least one endpoint") as error:
        state.result()
    assert "generate.base_urls in a recipe" in error.value.fix  # not only a flag pipeline lacks
    assert "| generate | failed | " in summary_of(state)
    assert stage_states(state.state_details.flow_run_id)["generate"][0] == "FAILED"  # its subflow said so


def test_every_run_leaves_a_keyed_summary_artifact(prefect_api, config, tmp_path):
    config.stages = ["vocab"]
    config.target.path = str(tmp_path)
    state = pipeline(config, return_state=True)

    assert "| vocab | blocked |" in summary_of(state)


def summary_of(state) -> str:
    """The run's one `pipeline-summary` artifact."""
    mine = artifacts("pipeline-summary", flow_run_id=state.state_details.flow_run_id)
    assert len(mine) == 1
    return mine[0].data


def test_the_flow_parameter_is_the_pipeline_config_so_the_ui_renders_it_as_a_form():
    schema = pipeline.parameters.model_dump()
    assert list(schema["properties"]) == ["config"]
    assert schema["definitions"]["PipelineConfig"]["properties"]["generate"]


def test_an_api_key_reaches_no_log_artifact_parameter_or_manifest(
    prefect_api, config, tmp_path, make_fake_server, monkeypatch
):
    from prefect.client.orchestration import get_client

    started, secret = datetime.now(UTC), "sk-eagle3-test-0123456789"
    monkeypatch.setenv("EAGLE3_TEST_KEY", secret)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n{"prompt": "Q2"}\n')
    config.stages = ["generate"]
    config.generate = GenerateConfig(
        prompts={"input": str(tmp_path / "prompts.jsonl")},
        base_urls=[make_fake_server().url],
        api_key_env="EAGLE3_TEST_KEY",
        return_token_ids=False,
    )

    state = pipeline(config, return_state=True)

    assert state.is_completed()
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    on_disk = [p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*.json")]
    logs, published = logs_since(started), artifacts()
    assert logs and published
    seen = [str(run.parameters), *(log.message for log in logs), *(str(a.data) for a in published), *on_disk]
    assert all(secret not in text for text in seen)


def test_every_declared_stage_has_a_flow_that_accepts_the_arguments_the_pipeline_passes(tmp_path):
    import inspect

    recipe = Path(__file__).resolve().parents[2] / "configs" / "toy.yaml"
    config = PipelineConfig.from_yaml(recipe).model_copy(update={"out": str(tmp_path)})
    assert config.stages == [spec.name for spec in STAGES] == list(STAGE_NAMES)
    for spec in STAGES:
        built = stage_flow(spec.name)
        assert built.name == spec.name
        inspect.signature(built.fn).bind(**spec.arguments(config))  # TypeError if they disagree


def test_a_stage_without_its_own_flow_gets_one_built_from_its_body_with_its_typed_parameters():
    from eagle3_core.stages.vocab.config import VocabConfig

    vocab = stage_flow("vocab")

    schema = vocab.parameters.model_dump()
    assert list(schema["properties"]) == ["cfg", "target", "sequences_dir", "out_dir"]
    assert schema["definitions"]["VocabConfig"]["properties"]["draft_vocab_size"]
    assert vocab.validate_parameters(
        {"cfg": {"draft_vocab_size": 8}, "target": {}, "sequences_dir": "s", "out_dir": "v"}
    )["cfg"] == VocabConfig(draft_vocab_size=8)


def test_the_toy_target_fills_the_target_path_and_its_prompts(tmp_path):
    from flows.pipeline import with_toy_paths

    config = PipelineConfig.model_validate(
        {"evaluate": {"prompts": {"input": "{toy}/prompts_heldout.jsonl", "max_samples": 100}}}
    )

    filled = with_toy_paths(config, "/cache/toy/abc")

    assert filled.target.path == "/cache/toy/abc"
    assert filled.generate.prompts.input == "/cache/toy/abc/prompts_train.jsonl"
    assert (filled.evaluate.prompts.input, filled.evaluate.prompts.max_samples) == (
        "/cache/toy/abc/prompts_heldout.jsonl",
        100,
    )


def test_a_second_run_reuses_a_complete_generation_without_any_endpoint(
    prefect_api, config, tmp_path, make_fake_server
):
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n')
    config.stages = ["generate"]
    config.generate = GenerateConfig(
        prompts={"input": str(tmp_path / "prompts.jsonl")}, base_urls=[make_fake_server().url], return_token_ids=False
    )
    assert pipeline(config)["generate"]["status"] == "ran"

    # e.g. vLLM not started again: the model named (the fake's), its key is known without asking
    config.generate = config.generate.model_copy(update={"base_urls": [], "model": "fake-model"})
    again = pipeline(config)

    assert again["generate"]["status"] == "reused"
    assert again["generate"]["counts"]["accepted"] == 1


def test_a_reused_generate_is_a_completed_subflow_that_reconstruct_waits_for_as_any_reused_stage(
    prefect_api, config, tmp_path, make_fake_server
):
    """The graph is the same shape whatever was reused: a reused generate started no subflow, so the
    run graph showed reconstruct with no input."""
    from eagle3_core.run.manifest import read_manifest
    from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer

    (tmp_path / "prompts.jsonl").write_text('{"prompt": "What is 2 + 2?"}\n')
    family = FAMILIES["qwen3"]
    config.target = config.target.model_validate(
        {"path": str(build_family_tokenizer(family, tmp_path / "tok")), **family.target}
    )
    config.stages = ["generate", "reconstruct"]
    config.generate = GenerateConfig(
        prompts={"input": str(tmp_path / "prompts.jsonl")}, base_urls=[make_fake_server().url], return_token_ids=False
    )
    assert pipeline(config)["generate"]["status"] == "ran"
    written = read_manifest(config.layout.generations).updated_at
    # no endpoint, the model named: nothing is asked
    config.generate = config.generate.model_copy(update={"base_urls": [], "model": "fake-model"})

    state = pipeline(config, return_state=True)

    assert state.is_completed(), state.message
    assert state.result()["generate"]["status"] == "reused"
    assert read_manifest(config.layout.generations).updated_at == written
    assert stage_graph(state.state_details.flow_run_id) == {"generate": set(), "reconstruct": {"generate"}}


def stage_graph(flow_run_id) -> dict[str, set[str]]:
    """Stage subflow -> the stage subflows Prefect records it waited for (the run graph's edges)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))
        )
        names = {run.id: client.read_flow(run.flow_id).name for run in runs}
        inputs = {names[run.id]: client.read_task_run(run.parent_task_run_id).task_inputs for run in runs}
    return {name: {names.get(i.id, str(i.id)) for i in found.get("wait_for", [])} for name, found in inputs.items()}


def stage_states(flow_run_id) -> dict[str, tuple[str, str]]:
    """Stage subflow -> its final state's type and message, as the run graph shows them."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))
        )
        return {client.read_flow(run.flow_id).name: (run.state.type.name, run.state.message or "") for run in runs}


def one_generation(config, tmp_path) -> None:
    """A complete generations/ of one answer, and a qwen3 target to reconstruct it with."""
    from eagle3_core.run.manifest import StageManifest, write_manifest
    from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer
    from tests.stages.reconstruct.records import record, write_generations

    user = [{"role": "user", "content": "What is 2 + 2?"}]
    write_generations(config.layout.generations, [record("a", user, "Two and two.", "4.")])
    write_manifest(config.layout.generations, StageManifest(stage="generate", status="complete", config_hash="x"))
    family = FAMILIES["qwen3"]
    config.target = config.target.model_validate(
        {"path": str(build_family_tokenizer(family, tmp_path / "tok")), **family.target}
    )


def test_each_stage_subflow_waits_for_the_results_of_the_stages_it_reads_so_the_graph_draws_the_dag(
    prefect_api, config, tmp_path
):
    one_generation(config, tmp_path)
    config.vocab.draft_vocab_size = 8
    config.stages = ["reconstruct", "vocab"]

    state = pipeline(config, return_state=True)

    assert state.is_completed(), state.message
    assert stage_graph(state.state_details.flow_run_id) == {"reconstruct": set(), "vocab": {"reconstruct"}}


# A stand-in for vLLM's API server (VLLMServer runs `python -m vllm.entrypoints.openai.api_server`):
# the loopback fake chat server, serving the model under the name vLLM would give it.
STANDIN_VLLM = """
import argparse, threading
from tests.fixtures.fake_server import FakeServer
p = argparse.ArgumentParser()
for name in ("--model", "--served-model-name", "--host"):
    p.add_argument(name)
p.add_argument("--port", type=int)
args, _ = p.parse_known_args()
FakeServer(model=args.served_model_name or args.model, host=args.host, port=args.port, record=False).start()
threading.Event().wait()
"""


def test_answers_of_the_model_served_before_are_not_reused_for_another_target(
    prefect_api, config, tmp_path, monkeypatch
):
    import os
    import sys

    import pyarrow.parquet as pq

    from eagle3_core.serve.config import ServeConfig

    api = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    api.mkdir(parents=True)
    for folder in (api, api.parent, api.parent.parent):
        (folder / "__init__.py").write_text("")
    (api / "api_server.py").write_text(STANDIN_VLLM)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), str(Path(__file__).parents[2])]))
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q1"}\n')
    config.stages = ["generate"]
    config.serve = ServeConfig(python=sys.executable, device="cpu", log_dir=str(tmp_path / "logs"))
    config.generate = GenerateConfig(prompts={"input": str(tmp_path / "prompts.jsonl")}, return_token_ids=False)
    first, second = tmp_path / "model-a", tmp_path / "model-b"
    for folder in (first, second):  # the same config, other weights
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "model.safetensors").write_text(f"weights of {folder.name}")

    config.target = config.target.model_copy(update={"path": str(first)})
    assert pipeline(config)["generate"]["status"] == "ran"
    reused = pipeline(config)
    assert reused["generate"]["status"] == "reused" and "serve" not in reused  # the same model: vLLM not started

    config.target = config.target.model_copy(update={"path": str(second)})
    assert pipeline(config)["generate"]["status"] == "ran"  # another model: its own answers
    models = pq.read_table(config.layout.generations / "accepted", columns=["model"]).column("model").to_pylist()
    assert models == ["model-b"]  # served by its folder's name, never its path
