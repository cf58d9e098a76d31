"""Tiny local tokenizers for each supported chat family, with the family's REAL special ids.

Nothing is downloaded: a byte-level BPE (256 byte symbols and a few merges, so leading spaces
and newlines are real tokens as in every family here) is padded with filler entries so that
each special token sits at the id the real tokenizer gives it, and the chat template is a
Jinja template written from the family's documented layout. Sources of the ids and layouts:

- Kimi-K2.5: ids from the issue (163606 `<think>`, 163607 `</think>`, 163586 `<|im_end|>`) and
  moonshotai/Kimi-K2.5 tokenizer_config.json (`<|im_user|>` 163587, `<|im_assistant|>` 163588,
  `<|im_system|>` 163594, `<|im_middle|>` 163601); layout `<|im_user|>user<|im_middle|>…<|im_end|>`
  with no newlines, generation prompt `<|im_assistant|>assistant<|im_middle|><think>`, earlier
  assistant turns with an empty `<think></think>` (moonshotai/Kimi-K2.5 chat_template.jinja;
  thinking-machines tinker-cookbook renderers/kimi_k2.py and kimi_k2_5.py describe the same).
- Qwen3: Qwen/Qwen3-8B tokenizer_config.json (`<|endoftext|>` 151643, `<|im_start|>` 151644,
  `<|im_end|>` 151645, `<think>` 151667, `</think>` 151668; 151669 ids, config vocab_size 151936)
  and its chat template: `<|im_start|>role\n…<|im_end|>\n`, generation prompt
  `<|im_start|>assistant\n`, earlier assistant turns only the text after `</think>`, except those
  after the last user query (the tool loop of the turn in progress), which keep their reasoning
  (`loop.index0 > ns.last_query_index`: interleave, as configs/qwen3.yaml declares).
- DeepSeek-R1: deepseek-ai/DeepSeek-R1 tokenizer_config.json (`<｜begin▁of▁sentence｜>` 0,
  `<｜end▁of▁sentence｜>` 1, `<think>` 128798, `</think>` 128799, `<｜User｜>` 128803,
  `<｜Assistant｜>` 128804; config vocab_size 129280) and its chat template: BOS + system,
  `<｜User｜>…`, earlier answers `<｜Assistant｜>…<｜end▁of▁sentence｜>`, generation prompt
  `<｜Assistant｜><think>\n` (the template update of 2025-02). DeepSeek-R1-0528: the same ids, a
  generation prompt of `<｜Assistant｜>` only (the model writes `<think>` itself); tool tokens
  128806-128814 (`<｜tool▁calls▁begin｜>` ... `<｜tool▁sep｜>`).
- Llama-3.1: meta-llama/Llama-3.1-8B-Instruct tokenizer_config.json (`<|begin_of_text|>` 128000,
  `<|end_of_text|>` 128001, `<|start_header_id|>` 128006, `<|end_header_id|>` 128007,
  `<|eom_id|>` 128008, `<|eot_id|>` 128009, `<|python_tag|>` 128010; 128256 ids) and its template
  `<|start_header_id|>role<|end_header_id|>\n\n{content|trim}<|eot_id|>` after a system turn
  with the date line (3.2/3.3: `strftime_now`); custom tools in the first user turn; a built-in
  tool call `<|python_tag|>…<|eom_id|>`; no think tokens.
- Tools: Kimi-K2.5 `<|tool_calls_section_begin|>` 163595 ... `<|tool_call_end|>` 163599 (its
  tool-call section may end the reasoning with no `</think>`); Qwen3 `<tool_call>` 151657,
  `</tool_call>` 151658, `<tool_response>` 151665, `</tool_response>` 151666.
The templates are written from these layouts (facts carry over, the real templates' code does not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# A few merges so multi-byte tokens (" the", "\n\n", " answer") exist as in a real BPE.
MERGES = [
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("i", "s"),
    ("Ġ", "i"),
    ("Ġi", "s"),
    ("Ċ", "Ċ"),
    ("Ġ", "a"),
    ("n", "s"),
    ("w", "e"),
    ("r", "e"),
    ("we", "re"),
    ("Ġa", "ns"),
    ("Ġans", "were"),
    ("Ġ", "4"),
    ("Ġ", "2"),
    ("o", "n"),
    ("Ġ", "+"),
]

KIMI_TEMPLATE = (
    "{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|im_system|>system<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'user' -%}<|im_user|>user<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'tool' -%}<|im_system|>tool<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'assistant' -%}<|im_assistant|>assistant<|im_middle|><think></think>{{ m.content }}<|im_end|>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>"
    "{%- if thinking is defined and thinking is false -%}<think></think>{%- else -%}<think>{%- endif -%}{%- endif -%}"
)

QWEN3_TOOLS = (
    "{%- if tools -%}{{ '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' -%}{{ messages[0].content + '\\n\\n' }}{%- endif -%}"
    "{{ '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools -%}{{ '\\n' + (tool | tojson) }}{%- endfor -%}"
    "{{ '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}'
    "\\n</tool_call><|im_end|>\\n' }}{%- endif -%}"
)

# Qwen3's rule for earlier reasoning (its template's ``ns.last_query_index``: the last user message that
# is not a tool response): an assistant turn after it (the tool loop of the turn in progress) keeps its
# ``reasoning_content`` as <think>\n...\n</think>\n\n; one before it is only the text after </think>.
QWEN3_LAST_QUERY = (
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) -%}"
    "{%- for m in messages[::-1] -%}{%- set index = (messages|length - 1) - loop.index0 -%}"
    "{%- if ns.multi_step_tool and m.role == 'user' and m.content is string and not "
    "(m.content.startswith('<tool_response>') and m.content.endswith('</tool_response>')) -%}"
    "{%- set ns.multi_step_tool = false -%}{%- set ns.last_query_index = index -%}{%- endif -%}{%- endfor -%}"
)

QWEN3_TEMPLATE = (
    QWEN3_TOOLS + QWEN3_LAST_QUERY + "{%- for m in messages -%}"
    "{%- if m.role == 'system' and tools and loop.first -%}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- set reasoning = m.reasoning_content if m.reasoning_content is string else "
    "(m.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') if '</think>' in m.content "
    "else '') -%}"
    "{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning) -%}"
    "{{ '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + "
    "m.content.split('</think>')[-1].lstrip('\\n') }}"
    "{%- else -%}{{ '<|im_start|>assistant\\n' + m.content.split('</think>')[-1].lstrip('\\n') }}{%- endif -%}"
    "{%- for call in m.tool_calls or [] -%}{%- if m.content or not loop.first -%}{{ '\\n' }}{%- endif -%}"
    '{{ \'<tool_call>\\n{"name": "\' + call.function.name + \'", "arguments": \' }}'
    "{%- if call.function.arguments is string -%}{{ call.function.arguments }}{%- else -%}{{ call.function.arguments | tojson }}{%- endif -%}"
    "{{ '}\\n</tool_call>' }}{%- endfor -%}{{ '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' -%}{{ '<|im_start|>user\\n<tool_response>\\n' + m.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else -%}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{%- endif -%}"
)


def _r1_template(generation_prompt: str) -> str:
    """R1's layout; ``generation_prompt`` is what follows the last turn (R1 forces ``<think>\\n``, R1-0528 does not)."""
    return (
        "{{ bos_token }}"
        "{%- for m in messages -%}{%- if m.role == 'system' -%}{{ m.content }}{%- endif -%}{%- endfor -%}"
        "{%- if tools -%}{{ '\\n\\n## Tools\\nYou have access to the following tools:\\n' }}"
        "{%- for tool in tools -%}{{ '\\n### ' + tool.function.name + '\\nParameters: ' + (tool.function.parameters | tojson) + '\\n' }}"
        "{%- endfor -%}{%- endif -%}"
        "{%- for m in messages -%}"
        "{%- if m.role == 'user' -%}{{ '<｜User｜>' + m.content }}"
        "{%- elif m.role == 'tool' -%}{{ '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + m.content + '<｜tool▁output▁end｜><｜tool▁outputs▁end｜>' }}"
        "{%- elif m.role == 'assistant' -%}{{ '<｜Assistant｜>' + m.content.split('</think>')[-1] + '<｜end▁of▁sentence｜>' }}"
        "{%- endif -%}{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '" + generation_prompt + "' }}{%- endif -%}"
    )


R1_TEMPLATE = _r1_template("<｜Assistant｜><think>\\n")  # deepseek-ai/DeepSeek-R1, template of 2025-02
R1_0528_TEMPLATE = _r1_template("<｜Assistant｜>")  # deepseek-ai/DeepSeek-R1-0528: no forced <think>

# Llama-3.1 layout with the 3.2/3.3 date line: today's date unless `date_string` is given.
LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if date_string is not defined -%}{%- set date_string = strftime_now('%d %b %Y') -%}{%- endif -%}"
    "{%- if messages[0].role == 'system' -%}{%- set system = messages[0].content | trim -%}{%- set rest = messages[1:] -%}"
    "{%- else -%}{%- set system = '' -%}{%- set rest = messages -%}{%- endif -%}"
    "{{ '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{%- if tools -%}{{ 'Environment: ipython\\n' }}{%- endif -%}"
    "{{ 'Cutting Knowledge Date: December 2023\\nToday Date: ' + date_string + '\\n\\n' + system + '<|eot_id|>' }}"
    "{%- for m in rest -%}"
    "{%- if m.role == 'tool' -%}{{ '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + m.content + '<|eot_id|>' }}"
    "{%- elif loop.first and tools -%}"
    "{{ '<|start_header_id|>user<|end_header_id|>\\n\\nGiven the following functions, please respond with a JSON for a "
    "function call with its proper arguments that best answers the given prompt.\\n\\n' }}"
    "{%- for tool in tools -%}{{ (tool | tojson) + '\\n\\n' }}{%- endfor -%}{{ m.content | trim + '<|eot_id|>' }}"
    "{%- else -%}{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content | trim + '<|eot_id|>' }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif -%}"
)


@dataclass(frozen=True)
class Family:
    """One chat family: its special ids, sizes, template and the recipe's `target:` section."""

    name: str
    specials: dict[str, int]
    tokenizer_len: int
    model_vocab: int
    bos: str | None
    eos: str
    template: str
    target: dict
    tool_call: str  # one call of `add` as the target writes it (the family's documented tool-call tokens)
    tool_call_end: str  # the token that ends a tool-call turn


R1_SPECIALS = {
    "<｜begin▁of▁sentence｜>": 0,
    "<｜end▁of▁sentence｜>": 1,
    "<think>": 128798,
    "</think>": 128799,
    "<｜User｜>": 128803,
    "<｜Assistant｜>": 128804,
    "<｜tool▁calls▁begin｜>": 128806,
    "<｜tool▁calls▁end｜>": 128807,
    "<｜tool▁call▁begin｜>": 128808,
    "<｜tool▁call▁end｜>": 128809,
    "<｜tool▁outputs▁begin｜>": 128810,
    "<｜tool▁outputs▁end｜>": 128811,
    "<｜tool▁output▁begin｜>": 128812,
    "<｜tool▁output▁end｜>": 128813,
    "<｜tool▁sep｜>": 128814,
}
R1_TARGET = {
    "family": "deepseek_r1",
    "think_open": "<think>",
    "think_close": "</think>",
    "think_open_id": 128798,
    "think_close_id": 128799,
    "end_of_turn": "<｜end▁of▁sentence｜>",
    "end_of_turn_id": 1,
}
R1_TOOL_CALL = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{arguments}\n```"
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
)

FAMILIES: dict[str, Family] = {
    "kimi_k2_5": Family(
        "kimi_k2_5",
        {
            "[BOS]": 163584,
            "[EOS]": 163585,
            "<|im_end|>": 163586,
            "<|im_user|>": 163587,
            "<|im_assistant|>": 163588,
            "<|im_system|>": 163594,
            "<|im_middle|>": 163601,
            "<think>": 163606,
            "</think>": 163607,
            "<|tool_calls_section_begin|>": 163595,
            "<|tool_calls_section_end|>": 163596,
            "<|tool_call_begin|>": 163597,
            "<|tool_call_argument_begin|>": 163598,
            "<|tool_call_end|>": 163599,
        },
        163840,
        163840,
        "[BOS]",
        "[EOS]",
        KIMI_TEMPLATE,
        {
            "family": "kimi_k2_5",
            "think_open": "<think>",
            "think_close": "</think>",
            "think_open_id": 163606,
            "think_close_id": 163607,
            "end_of_turn": "<|im_end|>",
            "end_of_turn_id": 163586,
        },
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0<|tool_call_argument_begin|>{arguments}"
        "<|tool_call_end|><|tool_calls_section_end|>",
        "<|im_end|>",
    ),
    "qwen3": Family(
        "qwen3",
        {
            "<|endoftext|>": 151643,
            "<|im_start|>": 151644,
            "<|im_end|>": 151645,
            "<think>": 151667,
            "</think>": 151668,
            "<tool_call>": 151657,
            "</tool_call>": 151658,
            "<tool_response>": 151665,
            "</tool_response>": 151666,
        },
        151669,
        151936,
        None,
        "<|im_end|>",
        QWEN3_TEMPLATE,
        {
            "family": "qwen3",
            "think_open": "<think>",
            "think_close": "</think>",
            "think_open_id": 151667,
            "think_close_id": 151668,
            "end_of_turn": "<|im_end|>",
            "end_of_turn_id": 151645,
            "history_reasoning": "interleave",  # QWEN3_LAST_QUERY, as configs/qwen3.yaml declares
        },
        '<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>',
        "<|im_end|>",
    ),
    "deepseek_r1": Family(
        "deepseek_r1",
        R1_SPECIALS,
        128815,
        129280,
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        R1_TEMPLATE,
        R1_TARGET,
        R1_TOOL_CALL,
        "<｜end▁of▁sentence｜>",
    ),
    "deepseek_r1_0528": Family(
        "deepseek_r1_0528",
        R1_SPECIALS,
        128815,
        129280,
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        R1_0528_TEMPLATE,
        R1_TARGET,
        R1_TOOL_CALL,
        "<｜end▁of▁sentence｜>",
    ),
    "llama3": Family(
        "llama3",
        {
            "<|begin_of_text|>": 128000,
            "<|end_of_text|>": 128001,
            "<|start_header_id|>": 128006,
            "<|end_header_id|>": 128007,
            "<|eom_id|>": 128008,
            "<|eot_id|>": 128009,
            "<|python_tag|>": 128010,
        },
        128256,
        128256,
        "<|begin_of_text|>",
        "<|eot_id|>",
        LLAMA3_TEMPLATE,
        {
            "family": "llama3",
            "think_open": None,
            "think_close": None,
            "end_of_turn": "<|eot_id|>",
            "end_of_turn_id": 128009,
        },
        '<|python_tag|>{{"name": "{name}", "parameters": {arguments}}}',
        "<|eom_id|>",
    ),
}


def _vocab(family: Family) -> dict[str, int]:
    """Byte symbols and merges at the lowest free ids, specials at their real ids, fillers between."""
    from tokenizers.pre_tokenizers import ByteLevel

    taken = set(family.specials.values())
    free = (i for i in range(family.tokenizer_len) if i not in taken)
    vocab = dict(family.specials)
    for symbol in sorted(ByteLevel.alphabet()) + [a + b for a, b in MERGES]:
        vocab[symbol] = next(free)
    for i in free:
        vocab[f"<filler_{i}>"] = i
    return vocab


def build_family_tokenizer(family: Family, out_dir: Path, template: str | None = None) -> Path:
    """Write a Hugging Face tokenizer directory (plus a config.json with vocab_size) for ``family``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(vocab=_vocab(family), merges=MERGES))
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in family.specials])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=family.bos,
        eos_token=family.eos,
        chat_template=(family.template if template is None else template) or None,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    (out_dir / "config.json").write_text(json.dumps({"vocab_size": family.model_vocab}), encoding="utf-8")
    return out_dir
