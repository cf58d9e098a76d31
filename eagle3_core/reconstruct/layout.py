"""One generated turn -> the ids the target saw and produced, and which of them to supervise.

Layout (every family; what differs between families lives in the tokenizer's chat template
and in the recipe's token texts, never here)::

    prompt  = chat_template(messages, add_generation_prompt=True)        # as the server rendered it
    output  = [think_open]? + ids(reasoning) + [think_close] + ids(content) + [end_of_turn]

- Kimi-K2.5 and DeepSeek-R1 put the think-open token into the generation prompt
  (``...<|im_middle|><think>``, ``<｜Assistant｜><think>\\n``); the target then generates the
  reasoning directly, so ``think_open`` is not repeated in the output. Qwen3 and the toy
  without it in the prompt generate it themselves. A non-reasoning target (Llama-3) has
  no think tokens at all: ``output = ids(content) + [end_of_turn]``.
- Think tokens are placed as their single special ids, never encoded from text. Reasoning
  and content are encoded apart: a special id splits the text on both sides in every
  Hugging Face tokenizer, so this equals encoding the whole completion with the specials.
- Thinking switched off by the template (Qwen3 ``enable_thinking: false`` renders
  ``<think>\n\n</think>\n\n``, K2.5 ``thinking: false`` renders ``<think></think>`` into the
  generation prompt): the think block is closed before the target speaks, so
  ``output = ids(content) + [end_of_turn]`` and the whole forced block stays masked out.
- ``finish_reason == "length"``: the target stopped mid-way, so no end-of-turn; and with no
  content, no think-close either (the generate stage kept the reasoning as it came).

Loss mask: 0 over the prompt, 1 over the output. One prompt token is masked IN: the
think-open id when the generation prompt forced it (K2.5, R1). Why:
- every family then supervises the same span, ``<think>`` + reasoning + ``</think>`` +
  answer + end-of-turn, so decoding the masked ids gives that text back byte-exact, and
  the draft vocabulary counts ``<think>`` for all families alike (Qwen3's drafter must
  propose it; a K2.5 drafter gains nothing from it but loses nothing either);
- it costs one deterministic label per sample (``<think>`` always follows the assistant
  header), so it cannot skew the drafter's distribution;
- the tokens the template forces AFTER it (R1's ``\\n``) stay masked out: they are neither
  generated nor part of the span above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eagle3_core.reconstruct.tokenizer import TokenFacts

# The forced think-open sits at the very end of the generation prompt, followed at most by
# a newline token or two (R1: `<think>`, `\n`); looking further back could pick up a
# `<think>` a user typed into an earlier turn.
FORCED_THINK_TAIL = 3
# A closed, empty think block at the end of the generation prompt spans at most
# `<think>`, `\n\n`, `</think>`, `\n\n` (Qwen3 with thinking off).
CLOSED_THINK_TAIL = 6


@dataclass(frozen=True)
class Sequence:
    """One training row before it is written."""

    input_ids: list[int]
    loss_mask: list[int]
    prompt_len: int


def output_ids(facts: TokenFacts, reasoning_ids: list[int], content_ids: list[int], *,
               think_in_prompt: bool, think_closed: bool, has_content: bool, stopped: bool) -> list[int]:
    """The ids the target generated for one turn (see the module docstring)."""
    if not facts.reasons or think_closed:
        out = list(content_ids)
    else:
        out = [] if think_in_prompt else [facts.think_open_id]
        out += reasoning_ids
        if stopped or has_content:
            out.append(facts.think_close_id)
        out += content_ids
    if stopped:
        out.append(facts.end_of_turn_id)
    return out


def forced_think_position(prompt_ids: list[int], facts: TokenFacts,
                          is_blank: Callable[[tuple[int, ...]], bool]) -> int | None:
    """Index of a think-open id the generation prompt ends with (only whitespace after it)."""
    if not facts.reasons:
        return None
    tail_start = max(0, len(prompt_ids) - FORCED_THINK_TAIL)
    for pos in range(len(prompt_ids) - 1, tail_start - 1, -1):
        if prompt_ids[pos] == facts.think_open_id:
            after = tuple(prompt_ids[pos + 1:])
            return pos if not after or is_blank(after) else None
    return None


def think_closed_in_prompt(prompt_ids: list[int], facts: TokenFacts,
                           is_blank: Callable[[tuple[int, ...]], bool]) -> bool:
    """True when the generation prompt ends with a closed think block (thinking switched off)."""
    if not facts.reasons:
        return False
    tail = prompt_ids[-CLOSED_THINK_TAIL:]
    if facts.think_close_id not in tail:
        return False
    close = len(tail) - 1 - tail[::-1].index(facts.think_close_id)
    after = tuple(tail[close + 1:])
    return facts.think_open_id in tail[:close] and (not after or is_blank(after))


def masked(prompt_ids: list[int], out_ids: list[int], forced_think: int | None) -> Sequence:
    """prompt + output with the loss mask (0 prompt, 1 output, 1 on a forced think-open)."""
    mask = [0] * len(prompt_ids) + [1] * len(out_ids)
    if forced_think is not None:
        mask[forced_think] = 1
    return Sequence(input_ids=list(prompt_ids) + list(out_ids), loss_mask=mask, prompt_len=len(prompt_ids))


def first_difference(a: list[int], b: list[int]) -> int | None:
    """First index where two id lists differ (the shorter length when one is a prefix); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
