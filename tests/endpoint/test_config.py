"""The request settings are the endpoint's: generate extends them, evaluation builds them alone."""

import pytest
from pydantic import ValidationError

from eagle3_core.endpoint.client import request_body
from eagle3_core.endpoint.config import RequestConfig
from eagle3_core.stages.generate.config import GenerateConfig


def test_evaluation_sends_its_prompts_with_request_settings_and_no_generate_config():
    from eagle3_core.stages.evaluate.online import client_config

    cfg = client_config(temperature=0.0, max_tokens=16, concurrency=2, timeout=30.0)
    assert type(cfg) is RequestConfig
    body = request_body(cfg, "toy", [{"role": "user", "content": "2 + 3?"}])
    assert body["temperature"] == 0.0 and body["max_tokens"] == 16 and body["return_token_ids"] is True
    assert "top_k" not in body


def test_a_template_variable_in_extra_body_is_refused_for_every_caller():
    for model in (RequestConfig, GenerateConfig):
        with pytest.raises(ValidationError, match="belong in target.chat"):
            model(extra_body={"chat_template_kwargs": {}})


def test_the_generate_form_lists_the_runs_own_fields_before_the_request_settings():
    assert list(GenerateConfig.model_json_schema()["properties"])[:4] == ["prompts", "source", "turns", "base_urls"]
