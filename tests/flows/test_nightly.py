"""The nightly flow end to end against a loopback OpenAI-compatible server and a real Prefect API:
only prompts without a record under the served model are sent, versions reuse shards, old ones go."""

import json

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.endpoint.client import PROBE_MESSAGES
from eagle3_core.nightly import versions as dv
from flows.nightly import NightlyConfig, nightly


def sent(server):
    """The prompts the server was asked, less the generate stage's one-line probe."""
    return sorted(p for p in server.prompts() if p != PROBE_MESSAGES[-1]["content"])


def write_prompts(path, prompts):
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))


@pytest.fixture
def nightly_config(tmp_path):
    def make(url, keep=7):
        recipe = PipelineConfig.model_validate(
            {
                "generate": {
                    "prompts": {"input": str(tmp_path / "prompts.jsonl")},
                    "base_urls": [url],
                    "return_token_ids": False,
                    "concurrency": 2,
                    "max_retries": 0,
                }
            }
        )
        return NightlyConfig(root=str(tmp_path / "dataset"), recipe=recipe, keep_versions=keep)

    return make


def test_nightly_sends_only_new_prompts_and_everything_again_when_the_model_changes(
    prefect_api, tmp_path, make_fake_server, nightly_config
):
    server = make_fake_server(model="toy-v1")
    write_prompts(tmp_path / "prompts.jsonl", ["Q1", "Q2", "Q3"])
    first = nightly(nightly_config(server.url, keep=2))
    assert sent(server) == ["Q1", "Q2", "Q3"]

    write_prompts(tmp_path / "prompts.jsonl", ["Q1", "Q2", "Q3", "Q4"])
    second = nightly(nightly_config(server.url, keep=2))
    assert sent(server) == ["Q1", "Q2", "Q3", "Q4"]  # only Q4 was new
    assert second["reuse"]["linked"] == 1 and second["reuse"]["rows"] == 3

    upgraded = make_fake_server(model="toy-v2")
    third = nightly(nightly_config(upgraded.url, keep=2))
    assert sent(upgraded) == ["Q1", "Q2", "Q3", "Q4"]  # a new model: every prompt again
    assert third["reuse"]["rows"] == 0

    root = tmp_path / "dataset"
    assert third["deleted"] == [first["version"]]
    assert dv.complete_versions(root) == [second["version"], third["version"]]
    record = dv.read_version(dv.versions_dir(root) / third["version"])
    assert record["model"] == "toy-v2" and record["counts"]["accepted"] == 4


def test_a_prompt_with_tools_is_carried_over_to_the_next_version_not_sent_again(
    prefect_api, tmp_path, make_fake_server, nightly_config
):
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    rows = [{"prompt": "Q1"}, {"prompt": "Weather in Paris?", "tools": [weather]}]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    server = make_fake_server(model="toy-v1")
    nightly(nightly_config(server.url))
    assert sent(server) == ["Q1", "Weather in Paris?"]

    second = nightly(nightly_config(server.url))

    assert sent(server) == ["Q1", "Weather in Paris?"]  # nothing new: the tool prompt is keyed as generate keys it
    assert second["reuse"]["rows"] == 2


def test_the_nightlys_run_page_has_its_own_summary(prefect_api, tmp_path, make_fake_server, nightly_config):
    """The version written, the served model, prompts new / reused / rejected / open, versions kept
    and pruned, and whether a drafter was trained: on the run's own page (it had no artifact)."""
    from tests.prefect_reads import artifacts

    server = make_fake_server(model="toy-v1")
    write_prompts(tmp_path / "prompts.jsonl", ["Q1", "Q2", "Q3"])
    first = nightly(nightly_config(server.url, keep=1))
    write_prompts(tmp_path / "prompts.jsonl", ["Q1", "Q2", "Q3", "Q4"])

    state = nightly(nightly_config(server.url, keep=1), return_state=True)

    result = state.result()
    (artifact,) = artifacts("nightly-summary", flow_run_id=state.state_details.flow_run_id)
    text = artifact.data
    assert f"# eagle3 nightly: version `{result['version']}`" in text
    for row in (
        "| served model | toy-v1 |",
        "| prompts in the input | 4 |",
        "| new tonight (asked) | 1 |",
        "| reused from the previous version | 3 |",
        "| accepted / rejected / open | 4 / 0 / 0 |",
        f"| versions kept | {result['version']} |",
        f"| versions pruned | {first['version']} |",
        "| drafter | not trained (nightly train: false) |",
    ):
        assert row in text, (row, text)
    assert result["summary"]["prompts"]["new"] == 1


def test_a_nightly_without_endpoints_fails_at_once_saying_what_to_set(prefect_api, tmp_path):
    from eagle3_core.errors import ConfigError

    config = NightlyConfig(root=str(tmp_path / "dataset"))

    with pytest.raises(ConfigError, match="the nightly needs recipe.generate.prompts and endpoints"):
        nightly(config)
    assert not (tmp_path / "dataset" / "versions").exists()


@pytest.mark.slow
@pytest.mark.deepspeed
def test_a_nightly_with_train_mode_auto_extracts_when_hidden_states_fit_as_the_pipeline_does(
    prefect_api, tmp_path, make_fake_server, toy_target, monkeypatch
):
    """train.mode auto is settled once sequences/ exist (offline when hidden/ fits on disk): the
    nightly must settle it too, or it never runs extract and always streams through a vLLM engine."""
    from eagle3_core.run.manifest import read_manifest
    from tests.fixtures.toy import toy_recipe

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    write_prompts(tmp_path / "prompts.jsonl", [f"What is {n} + {n}?" for n in range(12)])
    server = make_fake_server(model="toy")
    recipe = toy_recipe() | {"serve": None, "toy": None, "evaluate": {}}
    recipe["target"] = recipe["target"] | {"path": str(toy_target)}
    recipe["generate"] = {
        "prompts": {"input": str(tmp_path / "prompts.jsonl")},
        "base_urls": [server.url],
        "return_token_ids": False,
        "concurrency": 2,
        "max_retries": 0,
    }
    recipe["train"] = {
        "mode": "auto",
        "max_steps": 2,
        "ttt_steps": 1,
        "micro_batch_tokens": 256,
        "warmup_steps": 1,
        "heldout_fraction": 0.15,
        "online_vllm": {"vllm_python": str(tmp_path / "no-vllm" / "python")},  # streaming is not wanted here
    }
    config = NightlyConfig(root=str(tmp_path / "dataset"), recipe=PipelineConfig.model_validate(recipe), train=True)

    result = nightly(config)

    root = tmp_path / "dataset"
    hidden = read_manifest(dv.versions_dir(root) / result["version"] / "hidden")
    assert hidden is not None and hidden.status == "complete"
    assert read_manifest(dv.drafters_dir(root) / result["version"]).details["mode"] == "offline"
    drafter = result["summary"]["drafter"]  # and the run's summary says where it went and how it does
    assert drafter["folder"] == str(dv.drafters_dir(root) / result["version"]) and drafter["steps"] == 2
    assert drafter["heldout_sim_acceptance_length"] is not None
