"""Rows with tools: probed before the run, and refused where the target's rule says they are off its distribution."""

from pathlib import Path

from eagle3_core.config import PipelineConfig
from eagle3_core.endpoint.client import PROBE_MESSAGES
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import Recorder, accepted, config, prompts, rejected, write_jsonl

ROOT = Path(__file__).resolve().parents[3]
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}


def mixed_rows() -> list[dict]:
    return prompts(3) + [{"messages": [{"role": "user", "content": f"T{i}"}], "tools": [TOOL]} for i in range(2)]


def test_a_run_with_tool_rows_probes_each_endpoint_with_a_rows_tools_first(tmp_path, make_fake_server):
    server = make_fake_server(modes=("tool_calls",))
    reporter = Recorder()
    manifest = run_generate(
        config(write_jsonl(tmp_path / "in.jsonl", mixed_rows()), [server.url]), tmp_path / "o", reporter
    )

    with_tools = [r for r in server.requests if r.get("tools")]
    assert with_tools[0]["messages"] == PROBE_MESSAGES and with_tools[0]["tools"] == [TOOL]
    assert len(with_tools) == 1 + 2  # the probe's, then the two rows'
    assert "probe: requests with `tools` answered on 1 endpoint(s)" in reporter.lines
    assert manifest.counts["accepted"] == 5


def test_a_run_without_tool_rows_sends_no_tools_probe(tmp_path, make_fake_server):
    server = make_fake_server()
    run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(3)), [server.url]), tmp_path / "o")
    assert not [r for r in server.requests if r.get("tools")]


def test_tool_rows_a_thinking_run_of_deepseek_v3_1_would_answer_off_distribution_are_refused_unsent(
    tmp_path, make_fake_server
):
    server = make_fake_server(modes=("tool_calls",))
    src = write_jsonl(tmp_path / "in.jsonl", mixed_rows())
    cfg = config(src, [server.url], refuse_tool_rows="tools_need_thinking_off")
    manifest = run_generate(cfg, tmp_path / "o")

    assert manifest.counts["accepted"] == 3 and manifest.counts["rejected"] == 2
    assert manifest.details["reject_reasons"] == {"tools_need_thinking_off": 2}
    assert not [r for r in server.requests if r.get("tools")], "a refused row is never sent, nor probed for"
    assert set(rejected(tmp_path / "o")["reason"]) == {"tools_need_thinking_off"}
    sent = len(server.requests)
    again = run_generate(cfg, tmp_path / "o")
    assert len(server.requests) == sent and again.counts == manifest.counts  # a rerun sends nothing, adds nothing
    assert rejected(tmp_path / "o").height == 2 and accepted(tmp_path / "o").height == 3


def test_the_rule_flows_from_the_recipe_and_follows_the_thinking_switch():
    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "deepseek-v3.1.yaml").model_dump(mode="json")
    assert PipelineConfig.model_validate(recipe).generate.refuse_tool_rows == "tools_need_thinking_off"
    recipe["target"]["chat"]["chat_template_kwargs"] = {"thinking": False}  # a non-thinking run takes tool rows
    del recipe["generate"]["chat"]  # generate's is target.chat's copy
    assert PipelineConfig.model_validate(recipe).generate.refuse_tool_rows is None
    qwen3 = PipelineConfig.from_yaml(ROOT / "configs" / "qwen3.yaml")
    assert qwen3.generate.refuse_tool_rows is None


def test_a_family_without_tool_calls_rejects_tool_rows_unsent_and_its_server_gets_no_tool_parser(
    tmp_path, make_fake_server
):
    from eagle3_core.serve import ServeConfig, VLLMServer

    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "deepseek-r1-distill-qwen.yaml")
    assert recipe.target.tool_parser is None and recipe.generate.refuse_tool_rows == "calls_no_tools"
    argv = VLLMServer.for_target(recipe.target.model_copy(update={"path": str(tmp_path)}), ServeConfig()).command("py")
    assert "--tool-call-parser" not in argv and "--enable-auto-tool-choice" not in argv  # vLLM's would refuse to start
    server = make_fake_server(modes=("tool_calls",))
    cfg = config(write_jsonl(tmp_path / "in.jsonl", mixed_rows()), [server.url], refuse_tool_rows="calls_no_tools")
    manifest = run_generate(cfg, tmp_path / "o")
    assert manifest.counts["accepted"] == 3 and manifest.details["reject_reasons"] == {"calls_no_tools": 2}
    assert not [r for r in server.requests if r.get("tools")], "a refused row is never sent, nor probed for"


def tool_loop(i: int) -> dict:
    """A row whose history holds the assistant's tool call and its result, ``arguments`` as clients send it."""
    call = {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    return {
        "messages": [
            {"role": "user", "content": f"L{i}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "42"},
        ],
        "tools": [TOOL],
    }


def test_a_family_whose_template_cannot_render_a_past_tool_call_rejects_tool_loops_unsent_and_sends_the_rest(
    tmp_path, make_fake_server
):
    """DeepSeek-R1's template adds ``arguments`` to a string and vLLM hands it an object: each tool loop would be
    an HTTP 400. Its rows with tools and no earlier call are still sent."""
    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "deepseek-r1.yaml")
    assert recipe.generate.refuse_past_tool_calls == "past_tool_calls_unrendered"
    assert recipe.generate.refuse_tool_rows is None
    server = make_fake_server(modes=("tool_calls",))
    src = write_jsonl(tmp_path / "in.jsonl", mixed_rows() + [tool_loop(i) for i in range(2)])
    cfg = config(src, [server.url], refuse_past_tool_calls="past_tool_calls_unrendered")
    manifest = run_generate(cfg, tmp_path / "o")

    assert manifest.counts["accepted"] == 5 and manifest.details["reject_reasons"] == {"past_tool_calls_unrendered": 2}
    assert not [r for r in server.requests if any(m.get("tool_calls") for m in r["messages"])], "never sent"
    assert len([r for r in server.requests if r.get("tools")]) == 1 + 2  # the probe's, then the two rows'
    sent = len(server.requests)
    again = run_generate(cfg, tmp_path / "o")
    assert len(server.requests) == sent and again.counts == manifest.counts  # a rerun sends nothing, adds nothing
    qwen3 = PipelineConfig.from_yaml(ROOT / "configs" / "qwen3.yaml")
    assert qwen3.generate.refuse_past_tool_calls is None


def test_each_rows_rule_and_its_reason_is_in_the_key_so_changing_it_asks_again(tmp_path):
    from eagle3_core.stages.generate.stage import stage_keys

    sent = config(write_jsonl(tmp_path / "in.jsonl", [tool_loop(0)]), ["http://127.0.0.1:9/v1"], model="m")
    rules = [
        {},
        {"refuse_past_tool_calls": "past_tool_calls_unrendered"},
        {"refuse_tool_rows": "tools_need_thinking_off"},
        {"refuse_tool_rows": "calls_no_tools"},
    ]
    keys = [stage_keys(sent.model_copy(update=rule))[0] for rule in rules]
    assert len(set(keys)) == len(rules), keys


def test_a_recipe_that_calls_no_tools_and_names_a_tool_parser_is_refused():
    import pytest
    from pydantic import ValidationError

    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "deepseek-r1-distill-qwen.yaml").model_dump(mode="json")
    recipe["target"]["tool_parser"] = {"vllm": "deepseek_v3", "sglang": "deepseekv3"}
    with pytest.raises(ValidationError, match="calls_tools: false"):
        PipelineConfig.model_validate(recipe)
