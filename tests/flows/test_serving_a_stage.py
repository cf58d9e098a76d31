"""What the pipeline asks of a stage before it runs it, with ``serve`` only: the endpoint field the stage
states, whether it would skip, and the served URL put into that field; no stage's config is named in
the pipeline. Without ``serve`` it asks nothing: the stage's subflow checks its inputs and endpoints."""

from __future__ import annotations

from eagle3_core.config import PipelineConfig
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages import BY_NAME
from eagle3_core.stages.generate.config import GenerateConfig
from flows.pipeline import endpoint_field, served_field, with_endpoints
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


def test_without_serve_nothing_of_the_stage_is_asked_before_its_subflow(tmp_path):
    missing = recipe(tmp_path).model_copy(update={"generate": GenerateConfig(prompts={"input": str(tmp_path / "no")})})

    assert served_field(GENERATE, missing) is None  # its input is not read here: its subflow refuses it
    assert served_field(GENERATE, recipe(tmp_path).model_copy(update={"serve": ServeConfig()})) == "base_urls"


def test_serve_leaves_the_endpoints_a_recipe_names_to_answer(tmp_path):
    """``serve`` with ``generate.base_urls`` set (a deployment of the target): generate asks those, and the
    local vLLM is only evaluate's; before, a started server silently replaced the endpoints the recipe named."""
    named = recipe(tmp_path, base_urls=["http://127.0.0.1:9/v1"]).model_copy(update={"serve": ServeConfig()})

    # nothing listens at port 9: had the pipeline asked it here (the skip check names the model), this raised
    assert served_field(GENERATE, named) is None


def test_the_served_url_goes_into_the_stages_own_field(tmp_path):
    served = with_endpoints(GENERATE, recipe(tmp_path), "base_urls", ["http://127.0.0.1:8000/v1"])

    assert served.generate.base_urls == ["http://127.0.0.1:8000/v1"]


def answered() -> dict:
    return {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>r</think>a"}]}
