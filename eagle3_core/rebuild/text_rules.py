"""What the text path may decide from a record's text alone, from the recipe's declarations.

A record without the server's ids is rebuilt from its texts only where the texts show every
token the target wrote (docs/stages/reconstruct.md, "The token rules"). The
recipe says where they cannot, and each such record is a counted reject under its own reason:

- ``stripped_reasoning_without_ids``: the server's reasoning parser strips whitespace
  (``target.parser_strips_whitespace``: Kimi on vLLM >= 0.25, GLM, MiniMax): the reasoning text
  is not what the target wrote;
- ``thinking_state_unknown``: the prompt does not show whether the target thinks (no forced
  think-open, no closed block), and the recipe's thinking switch has no default the request
  settled (``target.thinking.default: null``, a hybrid model that decides itself);
- ``think_open_not_shown``: the target may or may not write its own ``<think>``
  (``target.think_open_always_written: false``: DeepSeek-R1's January template, after a tool
  output), and a parser files the reasoning the same either way.

With ids none of this matters: the ids decide, and the text is only their check.

A family whose server renders the prompt itself (``server_renders_prompt``) is stricter: its
prompt is the server's ids, never a local render. DeepSeek-V3.2, V4 and V4.1 have no Jinja
template (``target.tokenizer_mode``: vLLM encodes their prompts in Python). A harmony family
(``target.harmony``: gpt-oss) is the same: vLLM builds a ``gpt_oss`` prompt with openai-harmony
(``vllm/renderers/online_renderer.py`` ``_make_request_with_harmony``), never with the Hugging Face
template, and its prompt holds what no local render has (the day's date, the valid channels,
``<|constrain|>json`` and the tool results as harmony writes them). And its answer is several
harmony messages that the text flattens (``vllm/parser/harmony.py`` ``HarmonyParser.parse``:
every analysis message joined by "\n" into ``reasoning``, every final and commentary preamble
into ``content``, headers dropped), so ``open + reasoning + close + content`` is the answer only
when the target wrote one message of each, which the text cannot show. Hence
(``server_ids_missing``):

- ``no_server_prompt_ids``: the record has no prompt ids from the server: its prompt is never
  rebuilt from the local template (any such family);
- ``harmony_messages_without_ids`` (harmony only): the prompt ids came but the completion ids did not: the
  completion is never rebuilt from the texts.
"""

from __future__ import annotations

from eagle3_core.target.config import ChatSettings, TargetConfig


def undecidable(target: TargetConfig, chat: ChatSettings, reasoning: str, forced: bool) -> tuple[str, str] | None:
    """(reason, detail) when the text of a record without ids cannot decide its tokens, else None.
    ``forced``: the rendered prompt ends with the think-open marker."""
    if target.parser_strips_whitespace and reasoning:
        return (
            "stripped_reasoning_without_ids",
            "the recipe says the server's reasoning parser strips whitespace "
            "(target.parser_strips_whitespace), so the reasoning text is not what the target wrote; "
            "generate with return_token_ids",
        )
    if forced:
        return None
    if target.thinking_state(chat) is None:
        return (
            "thinking_state_unknown",
            f"the prompt does not show whether the target thinks and target.chat.chat_template_kwargs does "
            f"not set {target.thinking.kwarg!r} (the template leaves it to the model); generate with "
            "return_token_ids, or set the switch",
        )
    if not target.think_open_always_written and reasoning:
        return (
            "think_open_not_shown",
            "the target may skip its own think-open (target.think_open_always_written: false) and the "
            "reasoning text reads the same either way; generate with return_token_ids",
        )
    return None


def server_renders_prompt(target: TargetConfig) -> bool:
    """True where the server's prompt is its own render, not the local template's: a harmony family
    (vLLM renders gpt_oss with openai-harmony; see the module docstring), or one whose prompt vLLM
    encodes in Python (``target.tokenizer_mode``: DeepSeek-V3.2, V4, V4.1 have no Jinja template)."""
    return target.harmony is not None or target.tokenizer_mode is not None


def server_ids_missing(target: TargetConfig, record: dict) -> tuple[str, str] | None:
    """(reason, detail) when the record lacks the server's ids the row must be made of (a family whose
    server renders the prompt; a harmony answer), else None (see the module docstring)."""
    if not server_renders_prompt(target):
        return None
    if record.get("prompt_token_ids") is None:
        how = (
            "vLLM builds gpt-oss prompts with openai-harmony: its date, channels and tool layout are not the "
            "local chat template's"
            if target.harmony is not None
            else f"vLLM encodes it in Python (--tokenizer-mode {target.tokenizer_mode}): there is no local template"
        )
        return (
            "no_server_prompt_ids",
            f"the server renders this family's prompt itself ({how}), and the record has no prompt ids from it; "
            "generate with return_token_ids on a server that returns prompt ids",
        )
    if target.harmony is not None and record.get("completion_token_ids") is None:
        return (
            "harmony_messages_without_ids",
            "the server joins the target's harmony messages into the texts (every analysis message into "
            'reasoning, every final one into content, with "\n", headers dropped), so the texts do not show '
            "which messages the target wrote; generate with return_token_ids",
        )
    return None
