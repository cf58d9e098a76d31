"""The target model: where it lives and the token facts of its chat family.

Token ids such as Kimi-K2.5's ``<think>`` = 163606 live here (in the recipe under ``configs/``),
never in code paths; stages check them against the tokenizer before they trust them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from eagle3_core.base import StrictModel
from eagle3_core.errors import ConfigError

ChatFamily = Literal["kimi_k2_5", "qwen3", "deepseek_r1", "llama3"]


class ChatSettings(StrictModel):
    """How the server renders the prompt and writes the answer's text: the one place these are set.

    Generate sends them with every request and records them in the generations manifest;
    reconstruct renders the prompt with the recorded values and stops with one error when the
    recipe's differ. The defaults are vLLM's and SGLang's own.
    """

    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Variables for the chat template, sent as `chat_template_kwargs` and used by reconstruct (Qwen3 {enable_thinking: true}, Kimi-K2.5 {thinking: true}, Llama-3.1 {date_string: ...} to pin the date).",
    )
    skip_special_tokens: bool = Field(
        True,
        description="Server drops special tokens from the answer's text. Set false where the family's think tokens are special, or the reasoning parser cannot see them.",
    )
    spaces_between_special_tokens: bool = Field(
        True,
        description="Server puts a space around each special token when it detokenizes with a slow (tiktoken) tokenizer (vLLM issue 33457). Set false for Kimi-K2.5: `<think>ok</think>1` otherwise comes back as `ok ` and ` 1`.",
    )

    def request_fields(self) -> dict[str, Any]:
        """The JSON fields of a chat request that carry these settings.

        vLLM reads the detokenizer flags at the top level; SGLang reads
        `spaces_between_special_tokens` from inside `chat_template_kwargs` (its
        ChatCompletionRequest.to_sampling_params). Sent both ways; a template ignores an unknown
        variable."""
        kwargs = dict(self.chat_template_kwargs)
        if not self.spaces_between_special_tokens:
            kwargs["spaces_between_special_tokens"] = False
        fields: dict[str, Any] = {
            "skip_special_tokens": self.skip_special_tokens,
            "spaces_between_special_tokens": self.spaces_between_special_tokens,
        }
        if kwargs:
            fields["chat_template_kwargs"] = kwargs
        return fields


class TargetConfig(StrictModel):
    """A target model and the layout of its chat turns."""

    path: str | None = Field(
        None,
        description="Local Hugging Face directory (tokenizer, config, weights). Filled in by the toy builder when `toy` is set.",
    )
    family: ChatFamily = Field(
        "kimi_k2_5", description="Chat layout family: how turns, think tokens and end-of-turn are laid out."
    )
    trust_remote_code: bool = Field(
        False,
        description="Let transformers run the tokenizer's/model's own code (Kimi's tokenizer needs it). Off unless you trust the files.",
    )
    think_open: str | None = Field("<think>", description="Think-open token text; None for a non-reasoning model.")
    think_close: str | None = Field("</think>", description="Think-close token text; None for a non-reasoning model.")
    think_open_id: int | None = Field(
        None, description="Expected id of `think_open` (Kimi-K2.5: 163606); checked against the tokenizer when set."
    )
    think_close_id: int | None = Field(
        None, description="Expected id of `think_close` (Kimi-K2.5: 163607); checked against the tokenizer when set."
    )
    end_of_turn: str = Field("<|im_end|>", description="Token that ends an assistant turn.")
    end_of_turn_id: int | None = Field(
        None, description="Expected id of `end_of_turn` (Kimi-K2.5: 163586); checked when set."
    )
    chat: ChatSettings = Field(
        default_factory=ChatSettings,
        description="Template variables and detokenizer settings the server uses for this family; generate sends them, reconstruct checks them.",
    )
    reasoning_parser: str | None = Field(
        "kimi_k2",
        description="vLLM `--reasoning-parser` that fits the template (kimi_k2, qwen3, deepseek_r1); None for none.",
    )
    aux_layer_ids: list[int] | None = Field(
        None, description="Auxiliary layers for EAGLE-3 in vLLM's counting; None = (2, N//2, N-3)."
    )

    @model_validator(mode="after")
    def _think_tokens_come_in_pairs(self) -> "TargetConfig":
        if (self.think_open is None) != (self.think_close is None):
            raise ValueError("target.think_open and target.think_close must both be set or both be None")
        problem = aux_layer_problem(self.aux_layer_ids) if self.aux_layer_ids is not None else None
        if problem:
            raise ValueError(f"target.aux_layer_ids: {problem}")
        return self

    @property
    def reasons(self) -> bool:
        """True for a reasoning model (one with think tokens)."""
        return self.think_open is not None

    def require_path(self) -> str:
        if not self.path:
            raise ConfigError(
                "target.path is not set",
                fix="point target.path (or --target) at a local model directory, or set `toy` to build the toy target",
            )
        return self.path


def aux_layer_problem(ids: list[int], num_hidden_layers: int | None = None) -> str | None:
    """Why these auxiliary layer ids cannot be trained and served, or None.

    Three ids (low, mid, high), distinct and increasing: vLLM sorts custom ids before it
    captures them while the transformers extractor keeps the order given, so unsorted ids would
    feed ``fc`` its inputs in another order at serving time than in training. Each names a
    decoder layer of the target (vLLM counting: the input of layer k).
    """
    if len(ids) != 3:
        return f"must name 3 layers (low, mid, high), got {list(ids)}"
    if len(set(ids)) != 3:
        return f"the three layers must differ, got {list(ids)}; pass three distinct ids such as 2,16,29"
    if list(ids) != sorted(ids):
        return (
            f"must be increasing (low, mid, high), got {list(ids)}: vLLM sorts them, so {sorted(ids)} is "
            "what it would capture; write them sorted"
        )
    if num_hidden_layers is not None and not all(0 <= k < num_hidden_layers for k in ids):
        return f"{list(ids)} are not all within 0..{num_hidden_layers - 1} for a {num_hidden_layers}-layer target"
    return None


def default_aux_layer_ids(num_hidden_layers: int) -> list[int]:
    """EAGLE-3's low/mid/high layers as vLLM counts them: (2, N//2, N-3)."""
    return [2, num_hidden_layers // 2, num_hidden_layers - 3]
