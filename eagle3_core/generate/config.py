"""Configuration of the generate stage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from eagle3_core.base import StrictModel
from eagle3_core.target import ChatSettings, TargetConfig

# Request fields that belong to `target.chat` (one source of truth) or to generate itself.
RESERVED_EXTRA = (
    "chat_template_kwargs",
    "reasoning_effort",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "return_token_ids",
    "tools",
    "messages",
    "model",
)


class PromptSource(StrictModel):
    """Where prompts come from: a local jsonl/parquet file or a Hugging Face dataset."""

    input: str = Field(
        description="Local .jsonl/.json/.parquet path, a directory of them, or a Hugging Face dataset name (e.g. mlabonne/open-perfectblend)."
    )
    split: str = Field(
        "train",
        description="Dataset split, for Hugging Face datasets: a hub dataset, or a `save_to_disk` folder holding a DatasetDict.",
    )
    max_samples: int | None = Field(None, ge=1, description="Take at most this many input rows (in input order).")


class GenerateConfig(StrictModel):
    """Send prompts to OpenAI-compatible endpoints and keep every answer with its reasoning."""

    prompts: PromptSource | None = Field(None, description="The prompts. Required for a generate run.")
    source: Literal["server", "dataset"] = Field(
        "server",
        description="Where the answers come from: `server` sends each prompt to the endpoints; `dataset` takes each input row's own final assistant turn (its reasoning from a `reasoning_content` field or inline think tags), no server involved (`generate/dataset_source.py`).",
    )
    turns: Literal["last", "all"] = Field(
        "last",
        description="Which assistant turns of a conversation the target writes: `last` regenerates only the final one (the earlier turns stay the dataset's); `all` regenerates every answer turn in order, each sent with the target's own earlier answers (and their reasoning, which the server's template keeps or drops as the recipe's `target.history_reasoning` says) in the history: on-policy multi-turn data (`generate/turns.py`). An assistant turn that calls tools stays the dataset's, since the tool results after it answer those calls.",
    )
    base_urls: list[str] = Field(
        default_factory=list,
        description="OpenAI-compatible endpoints (`http://host:port/v1`); several are balanced by load (on the command "
        "line, repeat the option for several). Not used with `source: dataset`. Filled in by `eagle3 demo`.",
    )
    model: str | None = Field(None, description="Served model name; None = the one the first endpoint lists.")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Environment variable holding the API key (of the process that sends the requests: a worker's environment under a deployment); never logged.",
    )
    concurrency: int | Literal["auto"] = Field(
        128, description="In-flight requests per endpoint, or `auto` (AIMD between 1 and max_concurrency)."
    )
    max_concurrency: int = Field(128, ge=1, description="Upper bound for `auto` concurrency.")
    request_timeout: float = Field(
        600.0,
        gt=0,
        description="Deadline in seconds for one request, whole answer included; past it the request is abandoned and retried as a `timeout` (never kept cut short). 600 fits a 10K-token reasoning answer at 30 tokens/s (333 s) with room for queueing.",
    )
    max_retries: int = Field(
        5,
        ge=0,
        description="Retries of a transient failure (timeout, connection, 408/409/425/429, 5xx, malformed body, empty reasoning).",
    )
    max_tokens: int = Field(4096, ge=1, description="Completion token limit per request.")
    temperature: float = Field(0.6, ge=0, description="Sampling temperature.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling; None = server default.")
    seed: int | None = Field(None, description="Sampling seed sent with each request, when set.")
    allow_empty: bool = Field(
        False, description="Accept an input that yields no rows (a complete, empty run); otherwise that is an error."
    )
    require_reasoning: bool = Field(True, description="Reject (after retries) answers with empty reasoning.")
    refuse_tool_rows: SkipJsonSchema[bool] = Field(
        False,
        description="Set from the target by the pipeline (or `--recipe`): reject rows with tools before sending them (`tools_need_thinking_off`), for a model that calls tools only with thinking off (DeepSeek-V3.1, `target.tools_while_thinking: false`) in a run that thinks.",
    )
    return_token_ids: bool = Field(
        True, description="Ask vLLM for prompt and completion token ids (`return_token_ids`)."
    )
    extra_body: dict = Field(
        default_factory=dict,
        description="Extra JSON merged into each request body (e.g. a server's own sampling option). Template variables and detokenizer settings go in `target.chat`.",
    )
    # copies of the target's (``with_target``): never on a form, where they showed values the run ignores
    chat: SkipJsonSchema[ChatSettings] = Field(
        default_factory=ChatSettings,
        description="Copied from `target.chat` by the pipeline, the generate flow and `--recipe` on the CLI: sent with every request and recorded in the manifest. Set it in `target.chat`, not here.",
    )
    shard_rows: int = Field(
        1000, ge=1, description="Flush accepted/rejected rows to a new Parquet shard every this many rows ..."
    )
    flush_seconds: float = Field(30.0, gt=0, description="... or every this many seconds, whichever comes first.")
    retry_initial_wait: float = Field(
        1.0, ge=0, description="First retry backoff in seconds; doubles per attempt, with full jitter."
    )
    retry_max_wait: float = Field(60.0, ge=0, description="Upper bound of one retry backoff, in seconds.")
    outage_seconds: float = Field(
        300.0,
        gt=0,
        description="Stop the run when every endpoint's circuit breaker has been open (the endpoint down) for this long together: what finished is kept, and a rerun sends every prompt left open. Prompts wait meanwhile; none is rejected for an outage.",
    )
    breaker_failures: int = Field(
        5,
        ge=1,
        description="Open an endpoint's circuit breaker after this many server-side failures in a row there (connection, timeout, 5xx, 401/403/407/429, non-JSON or choice-less bodies): no request goes to it until its backoff has passed; its in-flight prompts move to the other endpoints without spending a retry.",
    )
    breaker_backoff: float = Field(
        1.0,
        gt=0,
        description="Seconds an opened breaker waits before one half-open probe request; doubles after each failed probe, up to breaker_max_backoff.",
    )
    breaker_max_backoff: float = Field(30.0, gt=0, description="Upper bound of a breaker's backoff, in seconds.")
    overdue_min_seconds: float = Field(
        10.0,
        gt=0,
        description="A request in flight is overdue past 3x the slowest of its endpoint's last 64 answers, but never sooner than this (a short answer's latency says little about a long one); overdue requests at an endpoint that answers nothing meanwhile count toward its breaker, so a hung endpoint costs about this, not request_timeout.",
    )
    breaker_probe_timeout: float = Field(
        30.0,
        gt=0,
        description="Deadline in seconds of the half-open probe an open breaker gets: one short request (probe_max_tokens) of the run's own, never a user's prompt, so a hung endpoint costs this, not request_timeout, each time it is tried again.",
    )
    shared_failure_attempts: int = Field(
        32,
        ge=2,
        description="Stop the run (exit 2, the server's words quoted) when this many distinct prompts in a row fail their first answer with the same reason and text: a setting every request fails on (max_tokens past the context, a revoked key, an unknown model), not the prompts. A prompt's retries never count, nor does an answer without reasoning (the probe checked the endpoints reason). The streak's rows stay open.",
    )
    probe_max_tokens: int = Field(64, ge=1, description="Completion token limit of the one probe request per endpoint.")
    limit_lease_seconds: float = Field(
        60.0,
        ge=60,
        description="Lease of the slots a run holds of an endpoint's shared limit (Prefect flow; Prefect's minimum is 60; renewed every half lease): a killed run's slots return to the other runs and its rerun at most this long after it dies, plus the API's sweep (5 s on the command's own ephemeral API, 15 s on `prefect server`).",
    )
    aimd_latency_factor: float = Field(
        2.0,
        gt=1,
        description="`auto` concurrency halves when a request's latency exceeds this multiple of the best recent latency.",
    )

    @model_validator(mode="after")
    def _concurrency_in_range(self) -> "GenerateConfig":
        if isinstance(self.concurrency, int) and self.concurrency < 1:
            raise ValueError("generate.concurrency must be >= 1 or 'auto'")
        reserved = sorted(set(RESERVED_EXTRA) & set(self.extra_body))
        if reserved:
            raise ValueError(
                f"generate.extra_body sets {', '.join(reserved)}: template variables and detokenizer "
                "settings belong in target.chat (generate sends them from there); the rest are set by generate"
            )
        if self.turns == "all" and self.source == "dataset":
            raise ValueError(
                "generate.turns: all regenerates each turn on a server; generate.source: dataset takes the rows' "
                "own answers: set one of them"
            )
        return self

    def with_target(self, target: TargetConfig) -> "GenerateConfig":
        """This config with the target's copies: its chat settings (``target.chat`` is the one source; a
        ``chat`` equal to the default counts as unset, as a form fills every field from its default) and
        its tool-rows rule. A ``chat`` set to other values is a ValueError naming both."""
        if self.chat != target.chat and self.chat != ChatSettings():
            raise ValueError(
                f"generate.chat {self.chat.model_dump()} differs from target.chat {target.chat.model_dump()}: set "
                "template variables and detokenizer settings once, in target.chat (generate.chat is its copy)"
            )
        copies = {"chat": target.chat, "refuse_tool_rows": target.refuses_tool_rows()}
        return self if all(getattr(self, k) == v for k, v in copies.items()) else self.model_copy(update=copies)

    def sampling_key(self) -> dict:
        """The settings that make two answers to one prompt different samples: sampling, and
        whether an answer without reasoning is one (such an answer must not count as done for a
        run that requires reasoning; the default adds nothing, so its keys stay as they were), and
        the chat settings sent (`chat.reasoning_effort` among them: a gpt-oss answer at high effort
        is another sample than one at medium; unset, it adds nothing, ``ChatSettings.key``)."""
        key = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "extra_body": self.extra_body,
            "chat": self.chat.key(),
        }
        if not self.require_reasoning:
            key["require_reasoning"] = False
        if self.turns == "all":  # its histories are the target's own answers: never the same sample as `last`
            key["turns"] = "all"
        return key
