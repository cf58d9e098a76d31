"""Every server layout the fake server speaks ends as sequences trained on the server's own ids.

vLLM's layout, SGLang 0.5.23's (``response_token_ids``, ``sglext``) and its earlier one, harmony's
channels (gpt-oss), a forced think with whitespace-stripping parsers (MiniMax-M2, GLM), and
stripped reasoning: generate records the ids, reconstruct trains on exactly them (100% from the
server), and the text path's check matches where the text shows every token.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import TargetConfig
from tests.stages.generate.helpers import accepted, config, prompts, write_jsonl
from tests.stages.reconstruct.conftest import ALL_FAMILIES
from tests.stages.reconstruct.test_preflight import family_tokens

LAYOUTS = [
    ("qwen3", (), "vllm", 1.0),
    ("qwen3", ("sglang_ids",), "sglang", 1.0),
    ("qwen3", ("sglang_legacy_ids",), "sglang_legacy", 1.0),
    ("gpt_oss", (), "vllm", 1.0),
    ("minimax_m2", ("sglang_ids",), "sglang", 1.0),
    ("glm45", ("stripped_reasoning",), "vllm", 0.0),
    ("deepseek_v3_1", ("sglang_ids",), "sglang", 1.0),
]


@pytest.mark.parametrize("family,modes,layout,match_rate", LAYOUTS)
def test_every_layout_trains_on_the_servers_ids(
    family, modes, layout, match_rate, tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    server = make_fake_server(modes=modes, family=family_tokens(family, family_tokenizers))
    src = write_jsonl(tmp_path / "in.jsonl", prompts(4))
    chat = {"thinking": True} if family == "deepseek_v3_1" else {}
    gen_manifest = run_generate(config(src, [server.url], chat={"chat_template_kwargs": chat}), tmp_path / "gen")
    assert set(gen_manifest.details["token_id_layouts"].values()) == {layout}
    target = TargetConfig(
        path=str(family_dirs[family]), **ALL_FAMILIES[family].target, chat={"chat_template_kwargs": chat}
    )
    manifest = run_reconstruct(ReconstructConfig(), target, tmp_path / "gen", tmp_path / "seq")
    seqs = [r for f in sorted((tmp_path / "seq").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    gens = {r["sample_id"]: r for r in accepted(tmp_path / "gen").iter_rows(named=True)}
    assert len(seqs) == 4 and {s["source"] for s in seqs} == {"server"}
    for s in seqs:
        assert s["input_ids"] == list(gens[s["sample_id"]]["prompt_token_ids"]) + list(
            gens[s["sample_id"]]["completion_token_ids"]
        )
    assert manifest.details["server_check"]["match_rate"] == match_rate


def test_an_interleaved_history_is_sent_with_its_reasoning_and_rendered_as_the_server_rendered_it(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    history = [
        {"role": "user", "content": "What is 1 + 1?"},
        {"role": "assistant", "content": "It is 2.", "reasoning_content": "One and one."},
        {"role": "user", "content": "And 2 + 2?"},
    ]
    server = make_fake_server(family=family_tokens("minimax_m2", family_tokenizers))
    src = write_jsonl(tmp_path / "in.jsonl", [{"messages": history}])
    run_generate(config(src, [server.url]), tmp_path / "gen")
    assert server.requests[-1]["messages"][1]["reasoning"] == "One and one."
    target = TargetConfig(path=str(family_dirs["minimax_m2"]), **ALL_FAMILIES["minimax_m2"].target)
    manifest = run_reconstruct(ReconstructConfig(), target, tmp_path / "gen", tmp_path / "seq")
    assert manifest.details["server_check"] == {"checked": 1, "matched": 1, "match_rate": 1.0}
    prompt = family_tokenizers["minimax_m2"].decode(accepted(tmp_path / "gen")["prompt_token_ids"][0].to_list())
    assert "<think>\nOne and one.\n</think>\n\nIt is 2." in prompt
