"""The toy target's tokenizer: byte-level BPE trained on the toy corpus, in the Kimi-K2.5 layout.

Guarantees:
- ``decode(encode(text)) == text`` byte for byte for any UTF-8 text (byte-level BPE over all
  256 bytes, no normalizer, no clean-up), leading spaces and newlines included: reconstruction
  re-tokenizes the server's text and depends on it.
- A digit is always one token (alone or after a space) (the arithmetic stays learnable); words merge into a few
  hundred ids, so a draft vocabulary is a real subset and ``d2t``/``t2d`` are not the identity.
- ``<think>``/``</think>`` are added *non-special* tokens (vLLM's reasoning parsers split the
  output on them that way and ``skip_special_tokens`` keeps them); the turn markers and the
  end-of-sequence token are special.
- The chat template renders K2.5's layout and its generation prompt ends with ``<think>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

IM_SYSTEM, IM_USER, IM_ASSISTANT = "<|im_system|>", "<|im_user|>", "<|im_assistant|>"
IM_MIDDLE, IM_END = "<|im_middle|>", "<|im_end|>"
EOS, PAD = "[EOS]", "[PAD]"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SPECIALS = [EOS, PAD, IM_SYSTEM, IM_USER, IM_ASSISTANT, IM_MIDDLE, IM_END]

# Kimi-K2.5's layout: role marker, role name, <|im_middle|>, content, <|im_end|>. An earlier
# assistant turn keeps its reasoning when the message carries it; `thinking=False` (a
# chat_template_kwargs switch, as K2.5 has) closes the think block at once.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' -%}<|im_system|>system<|im_middle|>{{ message.content }}<|im_end|>"
    "{%- elif message.role == 'user' -%}<|im_user|>user<|im_middle|>{{ message.content }}<|im_end|>"
    "{%- elif message.role == 'assistant' -%}<|im_assistant|>assistant<|im_middle|><think>"
    "{{ message.reasoning_content or message.reasoning or '' }}</think>{{ message.content or '' }}<|im_end|>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>"
    "{%- if thinking is defined and not thinking -%}<think></think>{%- else -%}<think>{%- endif -%}"
    "{%- endif -%}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """A ``tokenizers.Tokenizer``: byte-level BPE over ``texts``, specials first, think tokens last."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    # One digit a token (with its leading space, as Llama-style vocabularies do): numbers never
    # merge, so the model does arithmetic on digits, not on a lookup table of numbers.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r" ?\d"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 2,
        min_frequency=2,
        special_tokens=SPECIALS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in (THINK_OPEN, THINK_CLOSE)])
    return tok


def save_tokenizer(tok, out_dir: Path, model_max_length: int) -> None:
    """Save as a transformers fast tokenizer (``tokenizer.json``, config, ``chat_template.jinja``)."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        clean_up_tokenization_spaces=False,
        model_max_length=model_max_length,
        chat_template=CHAT_TEMPLATE,
    )
    fast.save_pretrained(str(out_dir))
