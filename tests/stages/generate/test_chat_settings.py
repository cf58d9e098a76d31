"""target.chat is set once: generate sends it, records it, and nothing else may set it."""

import json

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError, EndpointError
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.target.config import ChatSettings
from tests.stages.generate.helpers import accepted, config, prompts, write_jsonl

KIMI_CHAT = ChatSettings(
    chat_template_kwargs={"thinking": True}, skip_special_tokens=False, spaces_between_special_tokens=False
)


def test_every_request_carries_the_targets_chat_settings_and_the_manifest_records_them(tmp_path, fake_server):
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [fake_server.url], chat=KIMI_CHAT)
    manifest = run_generate(cfg, tmp_path / "out")
    for body in fake_server.requests:
        assert body["skip_special_tokens"] is False and body["spaces_between_special_tokens"] is False
        # SGLang reads the spaces flag from inside chat_template_kwargs; vLLM from the top level
        assert body["chat_template_kwargs"] == {"thinking": True, "spaces_between_special_tokens": False}
        assert body["return_token_ids"] is True
    assert manifest.details["chat"] == KIMI_CHAT.model_dump(mode="json")
    assert manifest.details["token_id_layouts"] == {fake_server.url: "vllm"}


def test_other_chat_settings_make_other_samples(tmp_path, fake_server):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(1))
    run_generate(config(src, [fake_server.url]), tmp_path / "a")
    run_generate(config(src, [fake_server.url], chat=KIMI_CHAT), tmp_path / "b")
    assert accepted(tmp_path / "a")["sample_id"][0] != accepted(tmp_path / "b")["sample_id"][0]


def test_the_pipeline_copies_target_chat_into_generate(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("target:\n  chat:\n    chat_template_kwargs: {enable_thinking: false}\n")
    cfg = PipelineConfig.from_yaml(recipe)
    assert cfg.generate.chat.chat_template_kwargs == {"enable_thinking": False}


def test_chat_settings_set_in_generate_too_are_one_clear_error(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "target:\n  chat:\n    chat_template_kwargs: {enable_thinking: true}\n"
        "generate:\n  chat:\n    chat_template_kwargs: {enable_thinking: false}\n"
    )
    with pytest.raises(ConfigError, match="set template variables and detokenizer settings once, in target.chat"):
        PipelineConfig.from_yaml(recipe)


@pytest.mark.parametrize("key", ["chat_template_kwargs", "skip_special_tokens", "spaces_between_special_tokens"])
def test_extra_body_cannot_set_what_target_chat_owns(key):
    with pytest.raises(ValueError, match=f"extra_body sets {key}: .* belong in target.chat"):
        GenerateConfig(extra_body={key: False})


def test_tools_of_a_row_are_sent_and_kept_with_the_tool_calls(tmp_path, make_fake_server):
    server = make_fake_server(tool_calls=True)
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    src = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "Add 2 and 3.", "tools": tools}, {"prompt": "No tools."}])
    run_generate(config(src, [server.url]), tmp_path / "out")
    by_prompt = {r["messages"][-1]["content"]: r for r in accepted(tmp_path / "out").iter_rows(named=True)}
    sent = {b["messages"][-1]["content"]: b.get("tools") for b in server.requests}
    assert sent["Add 2 and 3."] == tools and sent["No tools."] is None
    assert json.loads(by_prompt["Add 2 and 3."]["tools"]) == tools
    assert json.loads(by_prompt["Add 2 and 3."]["tool_calls"])[0]["function"]["name"] == "add"
    assert by_prompt["No tools."]["tools"] is None and by_prompt["No tools."]["tool_calls"] is None


def test_malformed_tools_reject_the_row_with_their_own_reason(tmp_path, fake_server):
    src = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "x", "tools": [{"name": "no function key"}]}])
    manifest = run_generate(config(src, [fake_server.url]), tmp_path / "out")
    assert manifest.details["reject_reasons"] == {"invalid_tools": 1}


@pytest.mark.parametrize(
    "mode,words", [("sglang_ids", "SGLang 0.5.23 layout"), ("sglang_legacy_ids", "SGLang layout before 0.5.23")]
)
def test_the_probe_names_the_sglang_id_layout_and_every_record_keeps_its_ids(tmp_path, make_fake_server, mode, words):
    from tests.stages.generate.helpers import Recorder

    server = make_fake_server(modes=(mode,))
    recorder = Recorder()
    run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [server.url]), tmp_path / "out", recorder)
    assert any(f"token ids returned ({words})" in line for line in recorder.lines)
    rows = accepted(tmp_path / "out")
    assert rows["prompt_token_ids"].null_count() == 0 and rows["completion_token_ids"].null_count() == 0


def test_prompt_ids_without_completion_ids_are_one_warning_naming_the_setting(tmp_path, make_fake_server):
    from tests.stages.generate.helpers import Recorder

    server = make_fake_server(modes=("prompt_ids_only",))
    recorder = Recorder()
    run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [server.url]), tmp_path / "out", recorder)
    probe = [line for line in recorder.lines if line.startswith("probe:")]
    assert len(probe) == 1 and "token ids returned" not in probe[0]
    assert "NO completion ids" in probe[0] and "return_token_ids" in probe[0] and "28246" in probe[0]


def test_a_server_whose_id_layout_matches_none_is_one_error_naming_its_fields(tmp_path, make_fake_server):
    server = make_fake_server(modes=("unknown_ids",))
    with pytest.raises(EndpointError, match=r"no known server uses \(fields: choices\[0\]\.output_token_ids"):
        run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [server.url]), tmp_path / "out")


def test_the_generate_flows_target_is_where_its_chat_settings_come_from(tmp_path):
    """The generate deployment's form has no generate.chat (a copy): the flow's target gives it, as
    the pipeline's does; a copy set to other values is one error naming both."""
    from eagle3_core.errors import ConfigError
    from eagle3_core.stages.generate.config import GenerateConfig
    from eagle3_core.stages.generate.stage import GenerateStage
    from eagle3_core.target.config import ChatSettings, TargetConfig

    target = TargetConfig(chat=ChatSettings(skip_special_tokens=False, chat_template_kwargs={"thinking": True}))
    stage = GenerateStage(GenerateConfig(), str(tmp_path / "out"), target=target)
    assert stage.cfg.chat == target.chat

    with pytest.raises(ConfigError, match="differs from target.chat"):
        GenerateStage(
            GenerateConfig(chat=ChatSettings(spaces_between_special_tokens=False)), str(tmp_path), target=target
        )
