"""`target.chat.reasoning_effort` goes where the servers read it: the chat request's top level.

vLLM 0.32 renders a gpt_oss prompt with openai-harmony and takes the effort from the request's
`reasoning_effort` alone (`renderers/online_renderer.py` `_make_request_with_harmony`; its
`chat_template_kwargs` are never read there), so an effort sent as a template variable made
medium-effort data recorded as another. SGLang's ChatCompletionRequest takes the same field.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from eagle3_core.config import PipelineConfig
from eagle3_core.contracts.generations import sample_key
from eagle3_core.endpoint.client import request_body
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.target.config import ChatSettings
from tests.stages.generate.helpers import accepted, config, prompts, write_jsonl

GPT_OSS = Path(__file__).resolve().parents[3] / "configs" / "gpt-oss.yaml"
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


def test_the_gpt_oss_recipe_sends_its_effort_at_the_top_level_and_none_as_a_template_variable():
    cfg = PipelineConfig.from_yaml(GPT_OSS)
    body = request_body(cfg.generate, "gpt-oss", MESSAGES)
    assert body["reasoning_effort"] == "medium"
    assert "reasoning_effort" not in body.get("chat_template_kwargs", {})
    assert cfg.target.chat.chat_template_kwargs == {}


def test_every_request_of_a_run_carries_the_effort_and_the_manifest_records_it(tmp_path, fake_server):
    chat = ChatSettings(reasoning_effort="high")
    src = write_jsonl(tmp_path / "in.jsonl", prompts(2))
    manifest = run_generate(config(src, [fake_server.url], chat=chat), tmp_path / "out")
    sent = fake_server.requests  # the probe's requests too
    assert len(sent) >= 2 and all(b["reasoning_effort"] == "high" and "chat_template_kwargs" not in b for b in sent)
    assert manifest.details["chat"]["reasoning_effort"] == "high"


def test_an_unset_effort_is_not_sent_and_leaves_the_sampling_key_as_it_was():
    cfg = GenerateConfig()
    assert "reasoning_effort" not in request_body(cfg, "m", MESSAGES)
    # the key every run without an effort has had: adding the field redoes no one's answers
    assert cfg.sampling_key()["chat"] == {
        "chat_template_kwargs": {},
        "skip_special_tokens": True,
        "spaces_between_special_tokens": True,
    }


def test_answers_at_another_effort_are_other_samples(tmp_path, fake_server):
    keys = {e: GenerateConfig(chat=ChatSettings(reasoning_effort=e)).sampling_key() for e in ("low", "medium", "high")}
    assert len({sample_key(MESSAGES, key) for key in keys.values()}) == 3
    assert sample_key(MESSAGES, GenerateConfig().sampling_key()) not in {sample_key(MESSAGES, k) for k in keys.values()}
    src = write_jsonl(tmp_path / "in.jsonl", prompts(1))
    run_generate(config(src, [fake_server.url], chat=ChatSettings(reasoning_effort="low")), tmp_path / "low")
    run_generate(config(src, [fake_server.url], chat=ChatSettings(reasoning_effort="high")), tmp_path / "high")
    assert accepted(tmp_path / "low")["sample_id"][0] != accepted(tmp_path / "high")["sample_id"][0]


def test_an_effort_among_the_template_variables_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="set target.chat.reasoning_effort instead"):
        ChatSettings(chat_template_kwargs={"reasoning_effort": "high"})


def test_extra_body_cannot_set_the_effort():
    with pytest.raises(ValueError, match="extra_body sets reasoning_effort: .* belong in target.chat"):
        GenerateConfig(extra_body={"reasoning_effort": "high"})


def test_reconstruct_renders_with_the_variables_vllm_gives_the_template():
    # vLLM 0.32 ChatCompletionRequest.build_chat_params: the effort, and enable_thinking unless set
    assert ChatSettings(reasoning_effort="low").template_kwargs() == {
        "reasoning_effort": "low",
        "enable_thinking": True,
    }
    assert ChatSettings(reasoning_effort="none").template_kwargs()["enable_thinking"] is False
    kept = ChatSettings(chat_template_kwargs={"enable_thinking": False}, reasoning_effort="high").template_kwargs()
    assert kept == {"enable_thinking": False, "reasoning_effort": "high"}


def test_an_effort_the_familys_server_refuses_is_one_config_error_before_any_request():
    """vLLM's harmony answers reasoning_effort max with HTTP 400 (low, medium, high only)."""
    import yaml
    from pydantic import ValidationError

    from eagle3_core.config import PipelineConfig, format_validation_error

    recipe = yaml.safe_load(GPT_OSS.read_text(encoding="utf-8"))
    recipe["target"]["chat"]["reasoning_effort"] = "max"
    with pytest.raises(ValidationError) as raised:
        PipelineConfig.model_validate(recipe)
    message = format_validation_error(raised.value)
    assert "target.chat.reasoning_effort: 'max'" in message and "low, medium, high" in message and "\n" not in message
