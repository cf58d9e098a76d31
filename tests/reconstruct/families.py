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
  `<|im_start|>assistant\n`, earlier assistant turns only the text after `</think>`.
- DeepSeek-R1: deepseek-ai/DeepSeek-R1 tokenizer_config.json (`<｜begin▁of▁sentence｜>` 0,
  `<｜end▁of▁sentence｜>` 1, `<think>` 128798, `</think>` 128799, `<｜User｜>` 128803,
  `<｜Assistant｜>` 128804; config vocab_size 129280) and its chat template: BOS + system,
  `<｜User｜>…`, earlier answers `<｜Assistant｜>…<｜end▁of▁sentence｜>`, generation prompt
  `<｜Assistant｜><think>\n` (the template update of 2025-02).
- Llama-3: meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json (`<|begin_of_text|>` 128000,
  `<|end_of_text|>` 128001, `<|start_header_id|>` 128006, `<|end_header_id|>` 128007,
  `<|eot_id|>` 128009; 128256 ids) and its template
  `<|start_header_id|>role<|end_header_id|>\n\n{content|trim}<|eot_id|>`; no think tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# A few merges so multi-byte tokens (" the", "\n\n", " answer") exist as in a real BPE.
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "s"), ("Ġ", "i"), ("Ġi", "s"), ("Ċ", "Ċ"),
          ("Ġ", "a"), ("n", "s"), ("w", "e"), ("r", "e"), ("we", "re"), ("Ġa", "ns"), ("Ġans", "were"),
          ("Ġ", "4"), ("Ġ", "2"), ("o", "n"), ("Ġ", "+")]

KIMI_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|im_system|>system<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'user' -%}<|im_user|>user<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'assistant' -%}<|im_assistant|>assistant<|im_middle|><think></think>{{ m.content }}<|im_end|>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|><think>{%- endif -%}")

QWEN3_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' + m.content.split('</think>')[-1].lstrip('\\n') + '<|im_end|>\\n' }}"
    "{%- else -%}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{%- endif -%}")

R1_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for m in messages -%}{%- if m.role == 'system' -%}{{ m.content }}{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}{{ '<｜User｜>' + m.content }}"
    "{%- elif m.role == 'assistant' -%}{{ '<｜Assistant｜>' + m.content.split('</think>')[-1] + '<｜end▁of▁sentence｜>' }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<｜Assistant｜><think>\\n' }}{%- endif -%}")

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for m in messages -%}"
    "{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content | trim + '<|eot_id|>' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif -%}")


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


FAMILIES: dict[str, Family] = {
    "kimi_k2_5": Family(
        "kimi_k2_5",
        {"[BOS]": 163584, "[EOS]": 163585, "<|im_end|>": 163586, "<|im_user|>": 163587, "<|im_assistant|>": 163588,
         "<|im_system|>": 163594, "<|im_middle|>": 163601, "<think>": 163606, "</think>": 163607},
        163840, 163840, "[BOS]", "[EOS]", KIMI_TEMPLATE,
        {"family": "kimi_k2_5", "think_open": "<think>", "think_close": "</think>", "think_open_id": 163606,
         "think_close_id": 163607, "end_of_turn": "<|im_end|>", "end_of_turn_id": 163586}),
    "qwen3": Family(
        "qwen3",
        {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<think>": 151667, "</think>": 151668},
        151669, 151936, None, "<|im_end|>", QWEN3_TEMPLATE,
        {"family": "qwen3", "think_open": "<think>", "think_close": "</think>", "think_open_id": 151667,
         "think_close_id": 151668, "end_of_turn": "<|im_end|>", "end_of_turn_id": 151645}),
    "deepseek_r1": Family(
        "deepseek_r1",
        {"<｜begin▁of▁sentence｜>": 0, "<｜end▁of▁sentence｜>": 1, "<think>": 128798, "</think>": 128799,
         "<｜User｜>": 128803, "<｜Assistant｜>": 128804},
        128815, 129280, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", R1_TEMPLATE,
        {"family": "deepseek_r1", "think_open": "<think>", "think_close": "</think>", "think_open_id": 128798,
         "think_close_id": 128799, "end_of_turn": "<｜end▁of▁sentence｜>", "end_of_turn_id": 1}),
    "llama3": Family(
        "llama3",
        {"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001, "<|start_header_id|>": 128006,
         "<|end_header_id|>": 128007, "<|eot_id|>": 128009},
        128256, 128256, "<|begin_of_text|>", "<|eot_id|>", LLAMA3_TEMPLATE,
        {"family": "llama3", "think_open": None, "think_close": None, "end_of_turn": "<|eot_id|>",
         "end_of_turn_id": 128009}),
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
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=family.bos, eos_token=family.eos,
                                   chat_template=family.template if template is None else template)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    (out_dir / "config.json").write_text(json.dumps({"vocab_size": family.model_vocab}), encoding="utf-8")
    return out_dir
