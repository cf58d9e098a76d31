"""How requests go to an OpenAI-compatible endpoint: sampling, the target's chat settings, retries, breakers.

The request settings the endpoint client reads (``client.py``, ``concurrency.py``) and every
caller shares: generate's config extends them (``GenerateConfig``), evaluation builds one for its
held-out prompts, and the pre-flight sends its suite with the run's own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from eagle3_core.base import StrictModel
from eagle3_core.target.config import ChatSettings

# Request fields that belong to `target.chat` (one source of truth) or to the client itself.
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


class RequestConfig(StrictModel):
    """Chat requests to OpenAI-compatible endpoints: what is sent, and how failures are retried."""

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
    require_reasoning: bool = Field(True, description="Reject (after retries) answers with empty reasoning.")
    return_token_ids: bool = Field(
        True, description="Ask vLLM for prompt and completion token ids (`return_token_ids`)."
    )
    extra_body: dict = Field(
        default_factory=dict,
        description="Extra JSON merged into each request body (e.g. a server's own sampling option). Template variables and detokenizer settings go in `target.chat`.",
    )
    # a copy of the target's (``GenerateConfig.with_target``): never on a form, where they showed values the run ignores
    chat: SkipJsonSchema[ChatSettings] = Field(
        default_factory=ChatSettings,
        description="Copied from `target.chat` by the pipeline, the generate flow and `--recipe` on the CLI: sent with every request and recorded in the manifest. Set it in `target.chat`, not here.",
    )
    retry_initial_wait: float = Field(
        1.0, ge=0, description="First retry backoff in seconds; doubles per attempt, with full jitter."
    )
    retry_max_wait: float = Field(60.0, ge=0, description="Upper bound of one retry backoff, in seconds.")
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
    aimd_latency_factor: float = Field(
        2.0,
        gt=1,
        description="`auto` concurrency halves when a request's latency exceeds this multiple of the best recent latency.",
    )

    @model_validator(mode="after")
    def _concurrency_in_range(self) -> "RequestConfig":
        if isinstance(self.concurrency, int) and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1 or 'auto'")
        reserved = sorted(set(RESERVED_EXTRA) & set(self.extra_body))
        if reserved:
            raise ValueError(
                f"extra_body sets {', '.join(reserved)}: template variables and detokenizer "
                "settings belong in target.chat (sent from there); the rest are set by the client"
            )
        return self
