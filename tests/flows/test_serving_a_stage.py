"""What the pipeline asks of a stage before it runs it: the endpoint field the stage states, whether
it would skip, and the served URL put into that field; no stage's config is named in the pipeline."""

from __future__ import annotations

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.errors import ConfigError
from eagle3_core.run.summary import Outcome
from eagle3_core.stages import BY_NAME
from eagle3_core.stages.generate.config import GenerateConfig
from flows.pipeline import endpoint_field, require_endpoint, with_endpoints
from tests.stages.generate.helpers import prompts, write_jsonl

GENERATE = BY_NAME["generate"]


def recipe(tmp_path, **generate) -> PipelineConfig:
    source = write_jsonl(tmp_path / "in.jsonl", prompts(2))
    return PipelineConfig(
        out=str(tmp_path / "run"), generate=GenerateConfig(prompts={"input": str(source)}, **generate)
    )


def test_a_stage_that_asks_a_server_names_its_field_and_one_that_asks_none_names_nothing(tmp_path):
    assert endpoint_field(GENERATE, recipe(tmp_path)) == "base_urls"
    assert endpoint_field(GENERATE, recipe(tmp_path, source="dataset")) is None
    assert endpoint_field(BY_NAME["vocab"], recipe(tmp_path)) is None


def test_a_stage_that_would_skip_asks_no_endpoint(tmp_path):
    from eagle3_core.stages.generate.stage import run_generate

    config = recipe(tmp_path, source="dataset")
    config.generate.prompts.input = str(write_jsonl(tmp_path / "answered.jsonl", [answered()]))
    run_generate(config.generate, config.layout.generations)
    served = config.model_copy(update={"generate": config.generate.model_copy(update={"source": "server"})})

    assert endpoint_field(GENERATE, served) == "base_urls"  # another source: other keys, work to do
    assert endpoint_field(GENERATE, config) is None  # complete: nothing would be asked


def test_no_endpoint_is_refused_naming_the_stages_own_field(tmp_path):
    outcome = Outcome("generate", "not selected", "")

    with pytest.raises(ConfigError, match=r"generate\.base_urls is empty and serve is not set") as error:
        require_endpoint(GENERATE, recipe(tmp_path), "base_urls", outcome)
    assert "set generate.base_urls" in error.value.fix and outcome.status == "failed"


def test_the_served_url_goes_into_the_stages_own_field(tmp_path):
    served = with_endpoints(GENERATE, recipe(tmp_path), "base_urls", ["http://127.0.0.1:8000/v1"])

    assert served.generate.base_urls == ["http://127.0.0.1:8000/v1"]
    require_endpoint(GENERATE, served, "base_urls", Outcome("generate", "not selected", ""))  # no error


def answered() -> dict:
    return {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>r</think>a"}]}
