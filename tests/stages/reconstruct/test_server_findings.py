"""Generate against a fake server that answers as real servers do for real families, then reconstruct.

Each test reproduces one finding of issue 15 (tests/fixtures/fake_answers.py) and asserts what
reaches training: the server's ids whenever they are there, the text path only where it can decide.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from eagle3_core.errors import StageError
from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import ChatSettings, TargetConfig
from tests.stages.generate.helpers import accepted, config, prompts, write_jsonl
from tests.stages.reconstruct.families import FAMILIES
from tests.stages.reconstruct.test_preflight import family_tokens


def generate_then_reconstruct(
    tmp_path, family, family_dirs, family_tokenizers, make_fake_server, *, modes=(), chat=None, rows=None, **gen
):
    chat = chat or ChatSettings()
    tmp_path.mkdir(parents=True, exist_ok=True)
    server = make_fake_server(modes=modes, family=family_tokens(family, family_tokenizers))
    src = write_jsonl(tmp_path / "in.jsonl", rows or prompts(4))
    run_generate(config(src, [server.url], chat=chat, **gen), tmp_path / "gen")
    target = TargetConfig(path=str(family_dirs[family]), **FAMILIES[family].target, chat=chat)
    manifest = run_reconstruct(ReconstructConfig(), target, tmp_path / "gen", tmp_path / "seq")
    seqs = [r for f in sorted((tmp_path / "seq").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    return manifest, seqs, accepted(tmp_path / "gen")


def server_sequence(row) -> list[int]:
    return list(row["prompt_token_ids"]) + list(row["completion_token_ids"])


@pytest.mark.parametrize("spaces, rate", [(False, 1.0), (True, 0.0)])
def test_kimi_spaces_around_specials_break_only_the_text_path_and_training_keeps_the_ids(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, spaces, rate
):
    manifest, seqs, gens = generate_then_reconstruct(
        tmp_path,
        "kimi_k2_5",
        family_dirs,
        family_tokenizers,
        make_fake_server,
        modes=("spaces_around_specials",),
        chat=ChatSettings(spaces_between_special_tokens=spaces),
    )
    assert manifest.details["server_check"]["match_rate"] == rate
    by_id = {r["sample_id"]: r for r in gens.iter_rows(named=True)}
    assert all(s["source"] == "server" and s["input_ids"] == server_sequence(by_id[s["sample_id"]]) for s in seqs)


def test_a_think_close_the_model_repeats_is_counted_as_such_and_training_keeps_it(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    manifest, seqs, gens = generate_then_reconstruct(
        tmp_path, "kimi_k2_5", family_dirs, family_tokenizers, make_fake_server, modes=("repeated_think_close",)
    )
    check, mismatches = manifest.details["server_check"], manifest.details["mismatches"]
    assert check == {"checked": 4, "matched": 0, "match_rate": 0.0, "repeated_think_close": 4}
    assert [m["repeated_think_closes"] for m in mismatches] == [1] * 4
    by_id = {r["sample_id"]: r for r in gens.iter_rows(named=True)}
    assert all(s["input_ids"] == server_sequence(by_id[s["sample_id"]]) for s in seqs)  # both </think> trained on


def test_sglang_ids_with_stripped_reasoning_are_read_and_win(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    manifest, seqs, gens = generate_then_reconstruct(
        tmp_path,
        "kimi_k2_5",
        family_dirs,
        family_tokenizers,
        make_fake_server,
        modes=("sglang_ids", "stripped_reasoning"),
        chat=ChatSettings(spaces_between_special_tokens=False),
    )
    assert gens["prompt_token_ids"].null_count() == 0
    assert manifest.details["server_check"]["match_rate"] == 0.0  # the stripped text cannot rebuild the ids
    assert len(seqs) == 4 and {s["source"] for s in seqs} == {"server"}


def test_end_of_turn_inside_the_reasoning_keeps_no_think_close_with_ids_and_is_rejected_without(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    manifest, seqs, _ = generate_then_reconstruct(
        tmp_path / "ids", "qwen3", family_dirs, family_tokenizers, make_fake_server, modes=("eot_in_reasoning",)
    )
    assert len(seqs) == 4 and all(151668 not in s["input_ids"] for s in seqs)  # no invented </think>
    assert manifest.details["server_check"]["match_rate"] == 1.0
    with pytest.raises(StageError, match="think_undecidable: 4"):
        generate_then_reconstruct(
            tmp_path / "text",
            "qwen3",
            family_dirs,
            family_tokenizers,
            make_fake_server,
            modes=("eot_in_reasoning",),
            return_token_ids=False,
        )


def test_thinking_switched_off_in_target_chat_reaches_server_and_reconstruct_alike(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    manifest, seqs, gens = generate_then_reconstruct(
        tmp_path,
        "qwen3",
        family_dirs,
        family_tokenizers,
        make_fake_server,
        modes=("thinking_off",),
        chat=ChatSettings(chat_template_kwargs={"enable_thinking": False}),
        require_reasoning=False,
    )
    assert set(gens["reasoning"]) == {""}
    assert manifest.details["server_check"]["match_rate"] == 1.0 and len(seqs) == 4


def test_tool_calls_train_on_the_server_ids_with_the_tools_in_the_prompt(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    rows = [{"prompt": f"Add {i} and 3.", "tools": tools} for i in range(3)] + [{"prompt": "Say hi."}]
    manifest, seqs, gens = generate_then_reconstruct(
        tmp_path, "qwen3", family_dirs, family_tokenizers, make_fake_server, modes=("tool_calls",), rows=rows
    )
    assert manifest.counts["tool_call_turns"] == 3 and len(seqs) == 4
    tok = family_tokenizers["qwen3"]
    for s in seqs:
        text = tok.decode(s["input_ids"], skip_special_tokens=False)
        if "Add" in text:
            assert "<tool_call>" in text and "# Tools" in text  # the call in the output, the tools in the prompt


def test_an_agents_history_reaches_the_server_and_the_rebuilt_prompt_with_its_tool_calls_and_results(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 3}'}}
    history = [
        {"role": "user", "content": "Add 1 and 3."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "4"},
    ]
    rows = [{"messages": history, "tools": tools}, {"prompt": "Say hi."}]
    manifest, seqs, gens = generate_then_reconstruct(
        tmp_path, "qwen3", family_dirs, family_tokenizers, make_fake_server, rows=rows
    )
    # the prompt rebuilt from the record equals the one the server rendered from the request, id for id
    assert manifest.details["server_check"] == {"checked": 2, "matched": 2, "match_rate": 1.0}
    assert len(seqs) == 2 and manifest.counts["rejected"] == 0
    tok = family_tokenizers["qwen3"]
    (agent,) = [s for s in seqs if "Add 1 and 3." in tok.decode(s["input_ids"])]
    prompt = tok.decode(agent["input_ids"][: agent["loss_mask"].index(1)], skip_special_tokens=False)
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 3}}\n</tool_call>' in prompt
    assert "<tool_response>\n4\n</tool_response>" in prompt
