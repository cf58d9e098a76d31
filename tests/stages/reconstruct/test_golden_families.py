"""Golden files of the families beyond the first four, written from each family's documented layout.

Per family (where the family has it): a single turn, a multi-turn history with a system prompt,
an agent's history (a tool call whose arguments are a JSON string, and its result), a turn that
calls a tool, and thinking switched off. Each case states what the server returned (texts, and
ids where the family needs them) and what the supervised span must decode to; the golden file
tests/golden/reconstruct-<family>-<case>.json pins the exact ids and mask. Regenerate after a
deliberate change with ``EAGLE3_REGEN_GOLDEN=1`` and read the diff.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eagle3_core.chat.render import server_messages
from eagle3_core.contracts.generations import stored_messages
from eagle3_core.rebuild.build import Reconstructor
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.target.config import ChatSettings, TargetConfig
from eagle3_core.target.tokenizer import token_facts
from tests.stages.reconstruct.families_more import MORE_FAMILIES
from tests.stages.reconstruct.records import record
from tests.stages.reconstruct.test_golden import compact_json

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
Q, R, A = "What is 2 + 2?", "The user wants 2 + 2. That is 4.", "The answer is 4."
ADD = [{"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}}}]
CALL = [{"id": "c0", "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}}]
SYSTEM_MULTI = [
    {"role": "system", "content": "You are a careful tutor."},
    {"role": "user", "content": "What is 1 + 1?"},
    {"role": "assistant", "content": "It is 2."},
    {"role": "user", "content": Q},
]
INTERLEAVED = [  # an earlier turn's reasoning, which MiniMax-M2's template keeps in the history
    {"role": "user", "content": "What is 1 + 1?"},
    {"role": "assistant", "content": "It is 2.", "reasoning": "One and one."},
    {"role": "user", "content": Q},
]
AGENT = [
    {"role": "user", "content": "Add 2 and 3."},
    {"role": "assistant", "content": None, "tool_calls": CALL},
    {"role": "tool", "tool_call_id": "c0", "name": "add", "content": "5"},
]


@dataclass(frozen=True)
class Case:
    """What the server returned for one prompt, and the span the target generated."""

    messages: list
    reasoning: str = ""
    content: str = ""
    completion: str | None = None  # the server's completion, as text (its ids are in the record)
    prompt: str | None = None  # the server's prompt, as text, where no template exists here (V3.2)
    rendered_prompt: bool = False  # the server sent its prompt ids: here the family template's render (gpt-oss)
    chat: dict = field(default_factory=dict)
    tools: list | None = None
    tool_calls: list | None = None
    supervised: str = ""  # what the masked-in ids decode to
    source: str = "text"


def harmony(reasoning: str, answer: str) -> str:
    return f"<|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant<|channel|>final<|message|>{answer}"


HARMONY_CALL = (
    "<|channel|>analysis<|message|>I should add.<|end|><|start|>assistant<|channel|>commentary to=functions.add "
    '<|constrain|>json<|message|>{"a": 2, "b": 3}<|call|>'
)
GLM_CALL = "\n<think>I should add.</think>\n<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n</tool_call><|observation|>"
MINIMAX_CALL = 'I should add.\n</think>\n\n<minimax:tool_call>\n<invoke name="add">\n<parameter name="a">2</parameter>\n</invoke>\n</minimax:tool_call>[e~['
DS_CALL = 'I should add.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{"a": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>'
V32_PROMPT = "<｜begin▁of▁sentence｜><｜User｜>What is 2 + 2?<｜Assistant｜>"
EOS = "<｜end▁of▁sentence｜>"


def ids_case(messages, completion: str, forced: str = "", reasoning: str = R, content: str = A, **more) -> Case:
    """A case the server's ids decide (the family's parser loses whitespace, the turn calls a tool, or
    no template exists here); ``reasoning`` and ``content`` are the texts its parser returned."""
    if more.get("tool_calls"):
        reasoning, content = "I should add.", ""
    return Case(messages, reasoning, content, completion, supervised=forced + completion, source="server", **more)


USER = [{"role": "user", "content": Q}]
ON = {"thinking": True}
CASES: dict[str, dict[str, Case]] = {
    # gpt-oss: vLLM renders the prompt with openai-harmony, so every record carries the server's ids
    # (one without is a reject, test_harmony.py); here the family template's render stands for its prompt
    "gpt_oss": {
        "single": ids_case(USER, harmony(R, A) + "<|return|>", rendered_prompt=True),
        "multi": ids_case(SYSTEM_MULTI, harmony(R, A) + "<|return|>", rendered_prompt=True),
        "agent": ids_case(
            AGENT,
            harmony("Got 5.", "It is 5.") + "<|return|>",
            reasoning="Got 5.",
            content="It is 5.",
            tools=ADD,
            rendered_prompt=True,
        ),
        "tools": ids_case(USER, HARMONY_CALL, tools=ADD, tool_calls=CALL, rendered_prompt=True),
    },
    "glm45": {
        "single": ids_case(USER, f"\n<think>{R}</think>\n{A}<|user|>"),
        "multi": ids_case(SYSTEM_MULTI, f"\n<think>{R}</think>\n{A}<|user|>"),
        "agent": ids_case(
            AGENT, "\n<think>Got 5.</think>\nIt is 5.<|user|>", reasoning="Got 5.", content="\nIt is 5.", tools=ADD
        ),
        "tools": ids_case(USER, GLM_CALL, tools=ADD, tool_calls=CALL),
        "thinking_off": Case(USER, "", "\n" + A, chat={"enable_thinking": False}, supervised="\n" + A + "<|user|>"),
    },
    "minimax_m2": {
        "single": ids_case(USER, f"{R}\n</think>\n\n{A}[e~[", forced="<think>"),
        "multi": ids_case(SYSTEM_MULTI, f"{R}\n</think>\n\n{A}[e~[", forced="<think>"),
        "agent": ids_case(
            AGENT,
            "Got 5.\n</think>\n\nIt is 5.[e~[",
            forced="<think>",
            reasoning="Got 5.",
            content="It is 5.",
            tools=ADD,
        ),
        "tools": ids_case(USER, MINIMAX_CALL, forced="<think>", tools=ADD, tool_calls=CALL),
        "interleaved": ids_case(INTERLEAVED, f"{R}\n</think>\n\n{A}[e~[", forced="<think>"),
    },
    "deepseek_v3_1": {
        "single": Case(USER, R, A, chat=ON, supervised=f"<think>{R}</think>{A}{EOS}"),
        "multi": Case(SYSTEM_MULTI, R, A, chat=ON, supervised=f"<think>{R}</think>{A}{EOS}"),
        "agent": Case(
            AGENT, "Got 5.", "It is 5.", chat=ON, tools=ADD, supervised=f"<think>Got 5.</think>It is 5.{EOS}"
        ),
        "tools": ids_case(USER, DS_CALL, forced="<think>", chat=ON, tools=ADD, tool_calls=CALL),
        "thinking_off": Case(USER, "", A, supervised=A + EOS),
    },
    "deepseek_v3_2": {
        "single": ids_case(USER, f"{R}</think>{A}{EOS}", forced="<think>", prompt=V32_PROMPT + "<think>", chat=ON),
        "multi": ids_case(
            SYSTEM_MULTI,
            f"{R}</think>{A}{EOS}",
            forced="<think>",
            chat=ON,
            prompt="<｜begin▁of▁sentence｜>You are a careful tutor.<｜User｜>What is 1 + 1?<｜Assistant｜></think>It is 2."
            + EOS
            + "<｜User｜>What is 2 + 2?<｜Assistant｜><think>",
        ),
        "tools": ids_case(
            USER,
            '<｜DSML｜function_calls>\n<｜DSML｜invoke name="add">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>' + EOS,
            prompt=V32_PROMPT + "</think>",
            tools=ADD,
            tool_calls=CALL,
        ),
        "thinking_off": ids_case(USER, A + EOS, prompt=V32_PROMPT + "</think>", reasoning=""),
    },
    "deepseek_r1_distill_qwen": {
        "single": Case(USER, R + "\n", "\n\n" + A, supervised=f"<think>{R}\n</think>\n\n{A}{EOS}"),
        "multi": Case(SYSTEM_MULTI, R + "\n", "\n\n" + A, supervised=f"<think>{R}\n</think>\n\n{A}{EOS}"),
    },
    "deepseek_r1_distill_llama": {
        "single": Case(USER, R + "\n", "\n\n" + A, supervised=f"<think>{R}\n</think>\n\n{A}{EOS}"),
        "multi": Case(SYSTEM_MULTI, R + "\n", "\n\n" + A, supervised=f"<think>{R}\n</think>\n\n{A}{EOS}"),
    },
}
ALL = [(family, name) for family, cases in CASES.items() for name in cases]


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def case_record(family: str, name: str, tokenizer) -> dict:
    case = CASES[family][name]
    messages = stored_messages([m | {"content": m["content"] or ""} for m in case.messages])
    prompt = case.prompt
    if case.rendered_prompt:
        prompt = tokenizer.apply_chat_template(
            server_messages(messages), tools=case.tools, tokenize=False, add_generation_prompt=True
        )
    return record(
        f"{family}-{name}",
        messages,
        case.reasoning,
        case.content,
        finish_reason="tool_calls" if case.tool_calls else "stop",
        prompt_token_ids=encode(tokenizer, prompt) if prompt else None,
        completion_token_ids=encode(tokenizer, case.completion) if case.completion is not None else None,
        tools=json.dumps(case.tools) if case.tools else None,
        tool_calls=json.dumps(case.tool_calls) if case.tool_calls else None,
    )


def reconstructor(family: str, tokenizer, chat: dict) -> Reconstructor:
    target = TargetConfig(**MORE_FAMILIES[family].target)
    facts = token_facts(tokenizer, target, "/nonexistent")
    return Reconstructor(tokenizer, facts, ReconstructConfig(), ChatSettings(chat_template_kwargs=chat), target)


def rebuild(family: str, name: str, tokenizer, rec: dict) -> tuple[list[int], list[int], str]:
    result = reconstructor(family, tokenizer, CASES[family][name].chat).run([rec])
    assert result.rejects == [], result.rejects
    return result.rows["input_ids"][0], result.rows["loss_mask"][0], result.rows["source"][0]


@pytest.mark.parametrize("family,name", ALL)
def test_reconstruction_matches_the_golden_file(family, name, family_tokenizers):
    tokenizer = family_tokenizers[family]
    path = GOLDEN / f"reconstruct-{family}-{name}.json"
    if os.environ.get("EAGLE3_REGEN_GOLDEN"):
        rec = case_record(family, name, tokenizer)
        ids, mask, source = rebuild(family, name, tokenizer, rec)
        golden = {"family": family, "case": name, "record": {k: v for k, v in rec.items() if v is not None}}
        golden |= {"source": source, "text": tokenizer.decode(ids), "ids": ids, "mask": mask}
        path.write_text(compact_json(golden), encoding="utf-8")
    golden = json.loads(path.read_text(encoding="utf-8"))
    ids, mask, source = rebuild(family, name, tokenizer, record(**{k: golden["record"].get(k) for k in RECORD_ARGS}))
    assert (ids, mask, source) == (golden["ids"], golden["mask"], golden["source"])


RECORD_ARGS = ("sample_id", "messages", "reasoning", "content", "finish_reason", "prompt_token_ids")
RECORD_ARGS += ("completion_token_ids", "tools", "tool_calls")


@pytest.mark.parametrize("family,name", ALL)
def test_the_supervised_span_is_what_the_target_generated_and_the_ids_decide_where_needed(
    family, name, family_tokenizers
):
    tokenizer, case = family_tokenizers[family], CASES[family][name]
    ids, mask, source = rebuild(family, name, tokenizer, case_record(family, name, tokenizer))
    supervised = tokenizer.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
    assert (supervised, source) == (case.supervised, case.source)


def test_an_interleaved_template_renders_the_earlier_turns_reasoning_into_the_prompt(family_tokenizers):
    tokenizer = family_tokenizers["minimax_m2"]
    ids, mask, _ = rebuild("minimax_m2", "interleaved", tokenizer, case_record("minimax_m2", "interleaved", tokenizer))
    prompt = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "]~b]ai\n<think>\nOne and one.\n</think>\n\nIt is 2.[e~[" in prompt
