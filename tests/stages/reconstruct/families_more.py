"""The families beyond the first four, each with its REAL special ids and a template written from
its documented layout (the ids' and layouts' sources are in each recipe under configs/).

gpt-oss (harmony channels), GLM-4.5/4.6, MiniMax-M2, DeepSeek-V3.1, DeepSeek-V3.2 (no Jinja
template at all: vLLM encodes it in Python, so its tokenizer here has none) and the two R1 distills.
Registered into ``families.FAMILIES``; the templates carry the layout's facts, not the real code.

Where the ids come from: each family's `target` (its marker texts and ids) is its recipe's, read from
configs/; gpt-oss's special ids and tokenizer size are the real o200k_harmony ones, read from the
quicktok package (tests/families/real_vocabularies.py). The other families' special tables below are
written by hand from their tokenizer_config.json, as no package ships their tokenizers (GLM, MiniMax,
DeepSeek-V3) or their added tokens (the R1 distills' DeepSeek tokens over Qwen2.5's and Llama-3's
BPE); tests/families/test_recipe_ids_real.py lists them. No package ships any chat template: the
templates are all written here.
"""

from __future__ import annotations

from eagle3_core.recipe_file import read_yaml
from eagle3_core.stages.reconstruct.recipes import bundled_families
from tests.families.real_vocabularies import vocabulary
from tests.stages.reconstruct.families import R1_SPECIALS, R1_TOOL_CALL, Family, _r1_template

HARMONY_SYSTEM = (
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.{{ '\\n' }}"
    "Knowledge cutoff: 2024-06{{ '\\n' }}Current date: {{ current_date | default('2025-06-28') }}{{ '\\n' }}{{ '\\n' }}"
    "Reasoning: {{ reasoning_effort | default('medium') }}{{ '\\n' }}{{ '\\n' }}# Valid channels: analysis, commentary, final. "
    "Channel must be included for every message.<|end|>"
)
GPT_OSS_TEMPLATE = (
    "{%- if messages[0].role in ['system', 'developer'] -%}{%- set sys = messages[0].content -%}"
    "{%- set rest = messages[1:] -%}{%- else -%}{%- set sys = '' -%}{%- set rest = messages -%}{%- endif -%}"
    + HARMONY_SYSTEM
    + "{%- if sys or tools -%}<|start|>developer<|message|>{%- if sys -%}# Instructions{{ '\\n' }}{{ '\\n' }}{{ sys }}{%- endif -%}"
    "{%- if tools -%}{{ '\\n' }}{{ '\\n' }}# Tools{{ '\\n' }}{{ '\\n' }}## functions{{ '\\n' }}{{ '\\n' }}namespace functions {{ '{' }}{{ '\\n' }}{{ '\\n' }}"
    "{%- for t in tools -%}// {{ t.function.description }}{{ '\\n' }}type {{ t.function.name }} = (_: "
    "{{ t.function.parameters | tojson }}) => any;{{ '\\n' }}{{ '\\n' }}{%- endfor -%}{{ '}' }} // namespace functions{%- endif -%}"
    "<|end|>{%- endif -%}"
    "{%- for m in rest -%}"
    "{%- if m.role == 'user' -%}<|start|>user<|message|>{{ m.content }}<|end|>"
    "{%- elif m.role == 'tool' -%}<|start|>functions.{{ m.name }} to=assistant<|channel|>commentary<|message|>"
    "{{ m.content }}<|end|>"
    "{%- elif m.tool_calls -%}"
    "{%- for c in m.tool_calls -%}<|start|>assistant<|channel|>commentary to=functions.{{ c.function.name }}"
    " <|constrain|>json<|message|>{{ c.function.arguments | tojson }}<|call|>{%- endfor -%}"
    "{%- else -%}<|start|>assistant<|channel|>final<|message|>{{ m.content }}<|end|>{%- endif -%}"
    "{%- endfor -%}{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}"
)

GLM_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- if tools -%}<|system|>{{ '\\n' }}# Tools{{ '\\n' }}{{ '\\n' }}You are provided with function signatures within <tools></tools> "
    "XML tags:{{ '\\n' }}<tools>{{ '\\n' }}{%- for t in tools -%}{{ t | tojson }}{{ '\\n' }}{%- endfor -%}</tools>{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|system|>{{ '\\n' }}{{ m.content }}"
    "{%- elif m.role == 'user' -%}<|user|>{{ '\\n' }}{{ m.content }}"
    "{%- elif m.role == 'tool' -%}<|observation|>{{ '\\n' }}<tool_response>{{ '\\n' }}{{ m.content }}{{ '\\n' }}</tool_response>"
    "{%- else -%}<|assistant|>{{ '\\n' }}<think></think>{%- if m.content -%}{{ '\\n' }}{{ m.content.strip() }}{%- endif -%}"
    "{%- for c in m.tool_calls or [] -%}{{ '\\n' }}<tool_call>{{ c.function.name }}"
    "{%- for k, v in c.function.arguments.items() -%}{{ '\\n' }}<arg_key>{{ k }}</arg_key>{{ '\\n' }}<arg_value>{{ v | tojson }}"
    "</arg_value>{%- endfor -%}{{ '\\n' }}</tool_call>{%- endfor -%}{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{ '\\n' }}<think></think>{%- endif -%}{%- endif -%}"
)

MINIMAX_TEMPLATE = (
    "]~!b[]~b]system{{ '\\n' }}{%- if messages[0].role == 'system' -%}{{ messages[0].content }}"
    "{%- else -%}You are a helpful assistant.{%- endif -%}"
    "{%- if tools -%}{{ '\\n' }}{{ '\\n' }}# Tools{{ '\\n' }}<tools>{{ '\\n' }}{%- for t in tools -%}<tool>{{ t.function | tojson }}</tool>{{ '\\n' }}"
    "{%- endfor -%}</tools>{%- endif -%}[e~[{{ '\\n' }}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}]~b]user{{ '\\n' }}{{ m.content }}[e~[{{ '\\n' }}"
    "{%- elif m.role == 'tool' -%}]~b]tool{{ '\\n' }}<response>{{ m.content }}</response>[e~[{{ '\\n' }}"
    "{%- elif m.role == 'assistant' -%}]~b]ai{{ '\\n' }}"
    "{%- if m.reasoning_content -%}<think>{{ '\\n' }}{{ m.reasoning_content }}{{ '\\n' }}</think>{{ '\\n' }}{{ '\\n' }}{%- endif -%}{{ m.content }}"
    "{%- for c in m.tool_calls or [] -%}{{ '\\n' }}<minimax:tool_call>{{ '\\n' }}<invoke name=\"{{ c.function.name }}\">{{ '\\n' }}"
    "{%- for k, v in c.function.arguments.items() -%}<parameter name=\"{{ k }}\">{{ v | tojson }}</parameter>{{ '\\n' }}"
    "{%- endfor -%}</invoke>{{ '\\n' }}</minimax:tool_call>{%- endfor -%}[e~[{{ '\\n' }}{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}]~b]ai{{ '\\n' }}<think>{{ '\\n' }}{%- endif -%}"
)

V31_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for m in messages -%}{%- if m.role == 'system' -%}{{ m.content }}{%- endif -%}{%- endfor -%}"
    "{%- if tools -%}{{ '\\n' }}{{ '\\n' }}## Tools{{ '\\n' }}{%- for t in tools -%}{{ '\\n' }}### {{ t.function.name }}{{ '\\n' }}Parameters: "
    "{{ t.function.parameters | tojson }}{{ '\\n' }}{%- endfor -%}{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<｜User｜>{{ m.content }}"
    "{%- elif m.role == 'tool' -%}<｜tool▁output▁begin｜>{{ m.content }}<｜tool▁output▁end｜>"
    "{%- elif m.role == 'assistant' -%}<｜Assistant｜></think>{{ m.content }}"
    "{%- for c in m.tool_calls or [] -%}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ c.function.name }}<｜tool▁sep｜>"
    "{{ c.function.arguments | tojson }}<｜tool▁call▁end｜><｜tool▁calls▁end｜>{%- endfor -%}<｜end▁of▁sentence｜>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<｜Assistant｜>{%- if thinking is defined and thinking -%}<think>"
    "{%- else -%}</think>{%- endif -%}{%- endif -%}"
)


RECIPE_TOKENS = ("think_open", "think_close", "think_open_id", "think_close_id", "end_of_turn", "end_of_turn_id")
RECIPE_TOKENS += ("other_turn_ends", "harmony")


def _target(family: str, **more) -> dict:
    """The family's `target`: its recipe's token texts and ids (configs/), then ``more``."""
    recipe = read_yaml(bundled_families()[family])["target"]
    return {"family": family} | {k: recipe[k] for k in RECIPE_TOKENS if k in recipe} | more


HARMONY_VOCAB = vocabulary("gpt_oss")  # the real o200k_harmony specials (quicktok's o200k_harmony.special)
HARMONY_TOKENS = ("<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>")
HARMONY_TOKENS += ("<|end|>", "<|message|>", "<|call|>")
HARMONY_SPECIALS = {text: HARMONY_VOCAB.specials[text] for text in HARMONY_TOKENS}
GLM_SPECIALS = {
    "<|endoftext|>": 151329,
    "[gMASK]": 151331,
    "<sop>": 151333,
    "<|system|>": 151335,
    "<|user|>": 151336,
    "<|assistant|>": 151337,
    "<|observation|>": 151338,
    "<think>": 151350,
    "</think>": 151351,
    "<tool_call>": 151352,
    "</tool_call>": 151353,
    "<tool_response>": 151354,
    "</tool_response>": 151355,
    "<arg_key>": 151356,
    "</arg_key>": 151357,
    "<arg_value>": 151358,
    "</arg_value>": 151359,
}
MINIMAX_SPECIALS = {
    "]~b]": 200019,
    "[e~[": 200020,
    "]~!b[": 200034,
    "<think>": 200050,
    "</think>": 200051,
    "<minimax:tool_call>": 200052,
    "</minimax:tool_call>": 200053,
}
DISTILL_QWEN_SPECIALS = {
    "<｜end▁of▁sentence｜>": 151643,
    "<｜User｜>": 151644,
    "<｜Assistant｜>": 151645,
    "<｜begin▁of▁sentence｜>": 151646,
    "<think>": 151648,
    "</think>": 151649,
}
DISTILL_LLAMA_SPECIALS = {
    "<｜begin▁of▁sentence｜>": 128000,
    "<｜end▁of▁sentence｜>": 128001,
    "<｜User｜>": 128011,
    "<｜Assistant｜>": 128012,
    "<think>": 128013,
    "</think>": 128014,
}
R1_GEN = "<｜Assistant｜><think>\\n"
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
HARMONY_CALL = "<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}"

MORE_FAMILIES: dict[str, Family] = {
    "gpt_oss": Family(
        "gpt_oss",
        HARMONY_SPECIALS,
        HARMONY_VOCAB.size,
        HARMONY_VOCAB.size,
        "<|startoftext|>",
        "<|return|>",
        GPT_OSS_TEMPLATE,
        _target("gpt_oss"),
        HARMONY_CALL,
        "<|call|>",
    ),
    "glm45": Family(
        "glm45",
        GLM_SPECIALS,
        151552,
        151552,
        None,
        "<|endoftext|>",
        GLM_TEMPLATE,
        _target("glm45", thinking={"kwarg": "enable_thinking", "default": True}, parser_strips_whitespace=True),
        "\n<tool_call>{name}\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n<arg_key>b</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
        "<|observation|>",
    ),
    "minimax_m2": Family(
        "minimax_m2",
        MINIMAX_SPECIALS,
        200064,
        200064,
        "]~!b[",
        "[e~[",
        MINIMAX_TEMPLATE,
        _target("minimax_m2", parser_strips_whitespace=True, history_reasoning="keep"),
        '\n<minimax:tool_call>\n<invoke name="{name}">\n<parameter name="a">2</parameter>\n<parameter name="b">3</parameter>\n</invoke>\n</minimax:tool_call>',
        "[e~[",
    ),
    "deepseek_v3_1": Family(
        "deepseek_v3_1",
        R1_SPECIALS,
        128815,
        129280,
        BOS,
        EOS,
        V31_TEMPLATE,
        _target("deepseek_v3_1", thinking={"kwarg": "thinking", "default": False}),
        R1_TOOL_CALL,
        EOS,
    ),
    "deepseek_v3_2": Family(
        "deepseek_v3_2",
        R1_SPECIALS,
        128815,
        129280,
        BOS,
        EOS,
        "",  # no Jinja template: vLLM encodes V3.2 in Python (tokenizers/deepseek_v32_encoding.py)
        _target("deepseek_v3_2", thinking={"kwarg": "thinking", "default": False}),
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="{name}">\n<｜DSML｜parameter name="a" string="false">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
        EOS,
    ),
    "deepseek_r1_distill_qwen": Family(
        "deepseek_r1_distill_qwen",
        DISTILL_QWEN_SPECIALS,
        151665,
        152064,
        BOS,
        EOS,
        _r1_template(R1_GEN),
        _target("deepseek_r1_distill_qwen"),
        "",
        EOS,
    ),
    "deepseek_r1_distill_llama": Family(
        "deepseek_r1_distill_llama",
        DISTILL_LLAMA_SPECIALS,
        128256,
        128256,
        BOS,
        EOS,
        _r1_template(R1_GEN),
        _target("deepseek_r1_distill_llama"),
        "",
        EOS,
    ),
}
