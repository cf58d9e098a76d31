"""The target model: where it lives and the token facts of its chat family.

A family is data, never code: its recipe under ``configs/`` declares the reasoning markers (a
think pair, or harmony's channels), the tokens that end an assistant turn, the thinking switch,
what the template does with earlier turns' reasoning, whether the server's parser strips
whitespace, and the template version the recipe was checked against. Token ids such as
Kimi-K2.5's ``<think>`` = 163606 live in the recipe, never in code paths; stages check them
against the tokenizer (``tokenizer.token_facts``) before they trust them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from eagle3_core.base import StrictModel
from eagle3_core.errors import ConfigError

# Why a row with tools is rejected before it is sent (generate's reject reasons; tool_rows_refusal)
CALLS_NO_TOOLS = "calls_no_tools"
TOOLS_NEED_THINKING_OFF = "tools_need_thinking_off"
# Why a row with an earlier tool call is rejected before it is sent (past_tool_calls_refusal)
PAST_TOOL_CALLS_UNRENDERED = "past_tool_calls_unrendered"


class Token(StrictModel):
    """A special token the family's template or parser relies on, and its expected id."""

    text: str = Field(description="The token's text; must be ONE id in the target's tokenizer.")
    id: int | None = Field(None, description="Expected id; checked against the tokenizer when set.")


class HarmonyChannels(StrictModel):
    """gpt-oss's harmony format: the reasoning is the `analysis` channel, the answer the `final` one.

    The generation prompt ends `<|start|>assistant`; the target writes
    `<|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>`
    (openai/harmony, "Reasoning" and "Receiving messages"), so the reasoning's open marker is
    `channel + analysis + message` and its close marker `end + start + role + channel + final + message`.
    """

    start: Token = Field(default_factory=lambda: Token(text="<|start|>"), description="Starts a message header.")
    channel: Token = Field(default_factory=lambda: Token(text="<|channel|>"), description="Names the channel.")
    message: Token = Field(default_factory=lambda: Token(text="<|message|>"), description="Ends the header.")
    end: Token = Field(
        default_factory=lambda: Token(text="<|end|>"), description="Ends a message that is not the last."
    )
    role: str = Field("assistant", description="The role text the target writes before a channel.")
    analysis: str = Field("analysis", description="The reasoning channel's name.")
    final: str = Field("final", description="The answer channel's name.")

    def open_text(self) -> str:
        return self.channel.text + self.analysis + self.message.text

    def close_text(self) -> str:
        return self.end.text + self.start.text + self.role + self.channel.text + self.final + self.message.text

    def tokens(self) -> dict[str, Token]:
        return {"start": self.start, "channel": self.channel, "message": self.message, "end": self.end}


class ThinkingSwitch(StrictModel):
    """The template variable that turns thinking on or off, and its value when unset."""

    kwarg: str = Field(
        description="Name of the `chat_template_kwargs` variable (Qwen3 `enable_thinking`, Kimi and DeepSeek-V3.1 `thinking`)."
    )
    default: bool | None = Field(
        description="What the template does when the variable is unset: true thinks, false does not (DeepSeek-V3.1), null when the model decides (a hybrid: only ids tell)."
    )
    states: dict[str, bool | None] = Field(
        default_factory=dict,
        description="For a switch whose values are words (MiniMax-M3's `thinking_mode`: enabled, disabled, adaptive): what each word does, as `default` says it (true thinks, false does not, null the model decides). A word sent that is not here is a config error.",
    )

    def state(self, value: Any) -> bool | None:
        """What the template does with ``value`` sent as the switch: a word through ``states`` (a word it
        does not list: None, only the ids tell), else its truth."""
        if value is None:
            return self.default
        if isinstance(value, str):
            return self.states.get(value)
        return bool(value)

    def value(self, think: bool) -> Any:
        """What to send for the template to think (or not): ``think`` itself, or for a word switch the first word
        ``states`` gives that meaning; None when no word does."""
        if not self.states:
            return think
        return next((word for word, state in self.states.items() if state is think), None)


class ChatSettings(StrictModel):
    """How the server renders the prompt and writes the answer's text: the one place these are set.

    Generate sends them with every request and records them in the generations manifest;
    reconstruct renders the prompt with the recorded values and stops with one error when the
    recipe's differ. The defaults are vLLM's and SGLang's own.
    """

    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Variables for the chat template, sent as `chat_template_kwargs` and used by reconstruct (Qwen3 {enable_thinking: true}, Kimi-K2.5 {thinking: true}, Llama-3.1 {date_string: ...} to pin the date). Not `reasoning_effort`: that is its own field below.",
    )
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = Field(
        None,
        description="Sent as the chat request's top-level `reasoning_effort`, where both servers read it: vLLM 0.32 builds a gpt_oss prompt with openai-harmony, never the template, and takes the effort from this field alone (harmony: low, medium, high; null means medium; chat_template_kwargs are ignored), and for other families passes it to the template as `reasoning_effort` (plus `enable_thinking: effort != none` unless chat_template_kwargs set it); SGLang's ChatCompletionRequest has the same top-level field, which it passes to the template as `reasoning_effort` (its `chat_template_kwargs.reasoning_effort` is moved there). In the sampling key: answers at another effort are other samples. Null: not sent.",
    )
    skip_special_tokens: bool = Field(
        True,
        description="Server drops special tokens from the answer's text. Set false where the family's think tokens are special, or the reasoning parser cannot see them.",
    )
    spaces_between_special_tokens: bool = Field(
        True,
        description="Server puts a space around each special token when it detokenizes with a slow (tiktoken) tokenizer (vLLM issue 33457). Set false for Kimi-K2.5: `<think>ok</think>1` otherwise comes back as `ok ` and ` 1`.",
    )

    @model_validator(mode="after")
    def _effort_is_its_own_field(self) -> "ChatSettings":
        if "reasoning_effort" in self.chat_template_kwargs:
            raise ValueError(
                "chat_template_kwargs.reasoning_effort: vLLM never reads it for gpt-oss (its harmony prompt takes "
                "the request's top-level reasoning_effort only, medium when unset), so answers would be recorded "
                "at an effort they were not made with; set target.chat.reasoning_effort instead"
            )
        return self

    def request_fields(self) -> dict[str, Any]:
        """The JSON fields of a chat request that carry these settings.

        vLLM reads the detokenizer flags and `reasoning_effort` at the top level; SGLang reads
        `reasoning_effort` there too, and `spaces_between_special_tokens` from inside
        `chat_template_kwargs` (its ChatCompletionRequest.to_sampling_params). Sent both ways; a
        template ignores an unknown variable."""
        kwargs = dict(self.chat_template_kwargs)
        if not self.spaces_between_special_tokens:
            kwargs["spaces_between_special_tokens"] = False
        fields: dict[str, Any] = {
            "skip_special_tokens": self.skip_special_tokens,
            "spaces_between_special_tokens": self.spaces_between_special_tokens,
        }
        if self.reasoning_effort is not None:
            fields["reasoning_effort"] = self.reasoning_effort
        if kwargs:
            fields["chat_template_kwargs"] = kwargs
        return fields

    def template_kwargs(self) -> dict[str, Any]:
        """The variables a server's chat template sees (reconstruct renders with them): the
        `chat_template_kwargs`, with vLLM's additions for a set `reasoning_effort` (vLLM 0.32
        ChatCompletionRequest.build_chat_params: `reasoning_effort`, and `enable_thinking:
        effort != "none"` unless the kwargs set it)."""
        kwargs = dict(self.chat_template_kwargs)
        if self.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.reasoning_effort
            kwargs.setdefault("enable_thinking", self.reasoning_effort != "none")
        return kwargs

    def key(self) -> dict[str, Any]:
        """These settings in generate's sampling key, which names each row (the generations/ contract, kept
        stable so no answer is requested twice): an unset `reasoning_effort` is left out, as it was before the
        field existed. The stage keys take the settings whole (``run.keys.stage_key``)."""
        key = self.model_dump(mode="json")
        if key["reasoning_effort"] is None:
            del key["reasoning_effort"]
        return key


class ToolParsers(StrictModel):
    """The servers' tool-call parsers for this family: what turns the target's tool-call tokens into
    `message.tool_calls`. vLLM refuses every request that carries `tools` unless it was started with
    `--enable-auto-tool-choice --tool-call-parser NAME` (a request with tools and no `tool_choice`
    is `auto` there), so eagle3 starts vLLM with `vllm`; SGLang's names differ (`--tool-call-parser`)."""

    vllm: str | None = Field(
        None, description="vLLM `--tool-call-parser` (kimi_k2, hermes, deepseek_v31, openai, glm45, minimax_m2 ...)."
    )
    sglang: str | None = Field(
        None, description="SGLang `--tool-call-parser` (kimi_k2, qwen25, deepseekv31, gpt-oss, glm45, minimax-m2 ...)."
    )


class TargetConfig(StrictModel):
    """A target model and the layout of its chat turns."""

    path: str | None = Field(
        None,
        description="Local Hugging Face directory (tokenizer, config, weights). Filled in by the toy builder when `toy` is set.",
    )
    family: str | None = Field(
        None,
        description="Name of the chat family this recipe declares (a label recorded in manifests; the layout is the fields below). Null: no recipe named one (a target given by path alone takes no family's values).",
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
    harmony: HarmonyChannels | None = Field(
        None,
        description="Harmony channel markers (gpt-oss) instead of a think pair; set think_open and think_close to null with it.",
    )
    end_of_turn: str = Field(
        "<|im_end|>", description="Token that ends an assistant turn that answers (the text path appends it)."
    )
    end_of_turn_id: int | None = Field(
        None, description="Expected id of `end_of_turn` (Kimi-K2.5: 163586); checked when set."
    )
    other_turn_ends: list[Token] = Field(
        default_factory=list,
        description="Other tokens that end an assistant turn (Llama-3.1 `<|eom_id|>`, gpt-oss `<|call|>`, GLM `<|user|>`/`<|observation|>`): checked against the tokenizer; a turn ending in one of them is held by the server's ids only.",
    )
    thinking: ThinkingSwitch | None = Field(
        None, description="The template's thinking switch; null for a model that always thinks or never does."
    )
    history_reasoning: Literal["drop", "keep", "interleave"] = Field(
        "drop",
        description="What the template does with earlier assistant turns' reasoning: drop it, keep it, or interleave it with their tool calls (MiniMax-M2, Kimi-K2-Thinking). With keep/interleave an input row's `reasoning` of a history turn is sent and rendered.",
    )
    history_supervised: bool = Field(
        False,
        description="With `generate.turns: all`, train on the earlier turns too: each answer of the history, as the template renders it inside the last turn's prompt, is supervised (1) like the last answer; otherwise the history is prompt (0). Needs `history_reasoning: keep` or `interleave` (the history then holds what the target wrote, reasoning included); a turn the template renders differently once later turns follow stays masked and is counted (`reconstruction/history.py`).",
    )
    think_open_always_written: bool = Field(
        True,
        description="The target always writes its own think-open where the prompt does not force it. False where it may skip it (DeepSeek-R1's January template, after a tool output): a record without ids is then rejected (`think_open_not_shown`).",
    )
    parser_strips_whitespace: bool = Field(
        False,
        description="The server's reasoning parser strips the reasoning's whitespace (Kimi on vLLM >= 0.25, GLM, MiniMax, several SGLang versions): the text is then not what the target wrote, and a record without ids is rejected (`stripped_reasoning_without_ids`).",
    )
    template_version: str | None = Field(
        None, description="The chat template this recipe was checked against (repository, file and release date)."
    )
    chat: ChatSettings = Field(
        default_factory=ChatSettings,
        description="Template variables and detokenizer settings the server uses for this family; generate sends them, reconstruct checks them.",
    )
    reasoning_parser: str | None = Field(
        None,
        description="vLLM `--reasoning-parser` that fits the template (kimi_k2, qwen3, deepseek_r1); None for none (a target given without its recipe: no family's parser is guessed).",
    )
    tool_parser: ToolParsers | None = Field(
        None,
        description="The family's tool-call parsers; eagle3 starts vLLM with `--enable-auto-tool-choice --tool-call-parser` from it. Null: vLLM refuses rows with `tools`.",
    )
    reasoning_efforts: list[str] | None = Field(
        None,
        description="The `reasoning_effort` values the family's server accepts (gpt-oss's harmony: low, medium, high; DeepSeek-V4.1: low, high, xhigh, max): `target.chat.reasoning_effort` outside them is a config error before any request (vLLM answers each with HTTP 400). Null: not checked.",
    )
    tool_call_start: Token | None = Field(
        None,
        description="The token that opens the target's tool calls in its output, ONE id (Qwen3 `<tool_call>` 151657, Kimi-K2.5 `<|tool_calls_section_begin|>` 163595), checked against the tokenizer: evaluate's per-request figures count the output from it on as the tool-call phase. Null: no tool-call phase there.",
    )
    calls_tools: bool = Field(
        True,
        description="The model has a tool-call format its tokenizer can write. False for the DeepSeek-R1 distills: their template copies R1's `<｜tool▁calls▁begin｜>` blocks, their Qwen2.5/Llama-3 vocabulary has none of those tokens, and vLLM's `deepseek_v3` tool parser refuses to start on it. Rows with tools are then rejected before they are sent (`calls_no_tools`), no tool parser is passed, and the pre-flight skips its tool cases.",
    )
    tools_while_thinking: bool = Field(
        True,
        description="The model calls tools while it thinks. False for DeepSeek-V3.1, which calls tools in non-thinking mode only (and whose template drops `tools`): a run that thinks then rejects rows with tools before sending them (`tools_need_thinking_off`), rather than train on answers the model would not give.",
    )
    renders_past_tool_calls: bool = Field(
        True,
        description="The template renders an earlier assistant turn's tool calls as vLLM hands them to it: `arguments` as a JSON object (vLLM parses the request's JSON text into one before rendering, as transformers' chat templates expect). False for DeepSeek-R1, whose template adds `arguments` to a string: vLLM answers every request with an earlier tool call HTTP 400, the template's TypeError. Rows with an earlier tool call are then rejected before they are sent (`past_tool_calls_unrendered`), and the pre-flight skips its tool-loop case; to send them, serve a template that writes `arguments | tojson` and set this true.",
    )
    tokenizer_mode: str | None = Field(
        None,
        description="vLLM `--tokenizer-mode` for a family whose prompt vLLM encodes in Python, not with a Jinja template (DeepSeek-V3.2 `deepseek_v32`, DeepSeek-V4 `deepseek_v4`); null: vLLM's default (the model's template).",
    )
    aux_layer_ids: list[int] | None = Field(
        None, description="Auxiliary layers for EAGLE-3 in vLLM's counting; None = (2, N//2, N-3)."
    )

    @model_validator(mode="after")
    def _think_tokens_come_in_pairs(self) -> "TargetConfig":
        if (self.think_open is None) != (self.think_close is None):
            raise ValueError("target.think_open and target.think_close must both be set or both be None")
        if self.harmony is not None and self.think_open is not None:
            raise ValueError(
                "target.harmony replaces the think pair: set target.think_open and target.think_close to null"
            )
        if not self.calls_tools and self.tool_parser is not None:
            raise ValueError(
                "target.calls_tools: false says the model writes no tool calls, but target.tool_parser names a parser "
                "for them (vLLM's refuses to start on a tokenizer without its tokens): set tool_parser to null"
            )
        if self.history_supervised and self.history_reasoning == "drop":
            raise ValueError(
                "target.history_supervised trains on earlier turns as the template renders them, but "
                "target.history_reasoning: drop says it removes their reasoning: those turns are not what the "
                "target wrote; set history_supervised: false, or history_reasoning to what the template does"
            )
        effort, accepted = self.chat.reasoning_effort, self.reasoning_efforts
        if effort is not None and accepted is not None and effort not in accepted:
            raise ValueError(
                f"target.chat.reasoning_effort: {effort!r} is not one the family's server accepts "
                f"(target.reasoning_efforts: {', '.join(accepted)}); every request would be refused"
            )
        switch = self.thinking
        sent = self.chat.template_kwargs().get(switch.kwarg) if switch else None
        if isinstance(sent, str) and sent not in switch.states:
            raise ValueError(
                f"target.chat.chat_template_kwargs.{switch.kwarg}: {sent!r} is a word, and target.thinking.states "
                f"does not say whether it thinks (it knows {sorted(switch.states) or 'none'}); add it there"
            )
        problem = aux_layer_problem(self.aux_layer_ids) if self.aux_layer_ids is not None else None
        if problem:
            raise ValueError(f"target.aux_layer_ids: {problem}")
        return self

    @property
    def is_reasoning_model(self) -> bool:
        """True for a reasoning model (a think pair or harmony channels)."""
        return self.think_open is not None or self.harmony is not None

    def reasoning_markers(self) -> tuple[str, str] | None:
        """The texts that open and close the reasoning in the target's output; None without reasoning."""
        if self.harmony is not None:
            return self.harmony.open_text(), self.harmony.close_text()
        if self.think_open is None:
            return None
        return self.think_open, self.think_close

    def thinking_state(self, chat: ChatSettings | None = None) -> bool | None:
        """Whether a request with ``chat`` (default: the recipe's own) has the target think: its switch as
        sent, else the template's default; True for a reasoning target without a switch; None when the
        model decides (a hybrid)."""
        if self.thinking is None:
            return self.is_reasoning_model
        return self.thinking.state((chat or self.chat).template_kwargs().get(self.thinking.kwarg))

    def chat_thinking(self, think: bool) -> ChatSettings:
        """The recipe's chat settings with the thinking switch set to think (or not); ConfigError for a target
        without a switch, or whose switch has no word for it."""
        value = self.thinking.value(think) if self.thinking is not None else None
        if value is None:
            raise ConfigError(
                f"target {self.family or self.path!r} has no thinking switch that turns thinking "
                f"{'on' if think else 'off'} (target.thinking: {self.thinking and self.thinking.model_dump()})",
                fix="leave evaluate.thinking unset (the recipe's chat settings alone), or declare target.thinking",
            )
        kwargs = {**self.chat.chat_template_kwargs, self.thinking.kwarg: value}
        return self.chat.model_copy(update={"chat_template_kwargs": kwargs})

    def tool_rows_refusal(self) -> str | None:
        """Why rows with tools are off this run's distribution (a reject reason), None when they are sent: the
        model calls no tools at all, or calls them only with thinking off (and a run that may think, a
        hybrid's, may not send them)."""
        if not self.calls_tools:
            return CALLS_NO_TOOLS
        if not self.tools_while_thinking and self.thinking_state() is not False:
            return TOOLS_NEED_THINKING_OFF
        return None

    def past_tool_calls_refusal(self) -> str | None:
        """Why rows with an earlier tool call cannot be sent (a reject reason), None when they can."""
        return None if self.renders_past_tool_calls else PAST_TOOL_CALLS_UNRENDERED

    def require_path(self, flag: str = "--target") -> str:
        """``path``, or one ConfigError naming the command's ``flag`` that sets it."""
        if not self.path:
            raise ConfigError(
                "target.path is not set",
                fix=f"point target.path (or {flag}) at a local model directory, or set `toy` to build the toy target",
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
