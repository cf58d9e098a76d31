"""One chat request with its retries: AsyncOpenAI, non-streaming, token ids when asked.

Retried (the named transient set, exponential backoff with full jitter, ``max_retries`` times):
timeouts, dropped connections, HTTP 408/409/425/429 and 5xx, malformed or truncated bodies, and
an empty reasoning when reasoning is required. Every other HTTP error (400: a prompt too long,
a bad parameter) fails that row at once: ``RequestFailed`` with the code. Each attempt takes a
slot on the least-loaded endpoint, so a retry can move to a healthy endpoint.

The body is read raw and JSON-decoded here (``with_raw_response``): the openai client's models
would drop vLLM's extra fields (``prompt_token_ids``, ``choices[].token_ids``) into
``model_extra`` and cost CPU per request for nothing.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from eagle3_core.generate.concurrency import Endpoint, EndpointPool
from eagle3_core.generate.config import GenerateConfig
from eagle3_core.generate.parse import Completion, MalformedBody, parse_completion

RETRY_STATUS = {408, 409, 425, 429}


class Transient(Exception):
    """A failure worth another attempt; ``reason`` is the code recorded if attempts run out."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


class RequestFailed(Exception):
    """A failure no retry can fix (or retries ran out): the row is rejected with ``reason``."""

    def __init__(self, reason: str, detail: str, attempts: int) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.attempts = reason, detail, attempts


@dataclass(frozen=True)
class Answer:
    completion: Completion
    endpoint: str
    attempts: int
    latency_s: float  # of the successful attempt


def build_client(url: str, cfg: GenerateConfig, max_connections: int):
    """An AsyncOpenAI client for one endpoint; our retries replace the client's own."""
    import httpx
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return AsyncOpenAI(base_url=url, api_key=os.environ.get(cfg.api_key_env) or "EMPTY",
                       timeout=cfg.request_timeout, max_retries=0,
                       http_client=DefaultAsyncHttpxClient(limits=limits, timeout=cfg.request_timeout))


def request_body(cfg: GenerateConfig, model: str, messages: list[dict], max_tokens: int | None = None) -> dict:
    """The keyword arguments of one chat request (sampling settings from the config)."""
    extra = dict(cfg.extra_body)
    if cfg.return_token_ids:
        extra["return_token_ids"] = True
    kwargs = {"model": model, "messages": messages, "max_tokens": max_tokens or cfg.max_tokens,
              "temperature": cfg.temperature, "extra_body": extra}
    if cfg.top_p is not None:
        kwargs["top_p"] = cfg.top_p
    if cfg.seed is not None:
        kwargs["seed"] = cfg.seed
    return kwargs


async def post_chat(endpoint: Endpoint, kwargs: dict) -> dict:
    """One attempt: the decoded JSON body, or ``Transient`` / ``RequestFailed``-worthy errors."""
    import openai

    try:
        raw = await endpoint.client.chat.completions.with_raw_response.create(**kwargs)
    except openai.APITimeoutError as exc:
        raise Transient("timeout", f"no answer within the request timeout ({exc})") from None
    except openai.APIConnectionError as exc:
        raise Transient("connection", f"connection failed: {exc.__cause__ or exc}") from None
    except openai.APIStatusError as exc:
        code = exc.status_code
        detail = f"HTTP {code}: {_short(exc.message)}"
        if code in RETRY_STATUS or code >= 500:
            raise Transient(f"http_{code}", detail) from None
        raise RequestFailed(f"http_{code}", detail, attempts=1) from None
    try:
        return json.loads(raw.http_response.content)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Transient("malformed_body", f"the response is not valid JSON: {exc}") from None


class Requester:
    """Sends one prompt through the pool until it succeeds, fails for good, or retries run out."""

    def __init__(self, cfg: GenerateConfig, model: str, pool: EndpointPool, on_retry=None) -> None:
        self.cfg, self.model, self.pool = cfg, model, pool
        self.on_retry = on_retry or (lambda reason: None)

    async def answer(self, messages: list[dict]) -> Answer:
        kwargs = request_body(self.cfg, self.model, messages)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.cfg.max_retries + 1), reraise=True,
            wait=wait_random_exponential(multiplier=self.cfg.retry_initial_wait, max=self.cfg.retry_max_wait),
            retry=retry_if_exception_type(Transient),
            before_sleep=lambda state: self.on_retry(state.outcome.exception().reason))
        attempts = 0
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    return await self._attempt(kwargs, attempts)
        except Transient as exc:
            raise RequestFailed(exc.reason, f"{exc.detail} (after {attempts} attempts)", attempts) from None
        except RequestFailed as exc:
            exc.attempts = attempts
            raise
        raise AssertionError("tenacity ended without a result")  # unreachable: reraise=True

    async def _attempt(self, kwargs: dict, attempts: int) -> Answer:
        endpoint = await self.pool.acquire()
        start = time.monotonic()
        try:
            body = await post_chat(endpoint, kwargs)
        except Transient as exc:
            if exc.reason == "timeout":
                endpoint.controller.on_timeout()
            raise
        finally:
            await self.pool.release(endpoint)
        latency = time.monotonic() - start
        endpoint.controller.on_success(latency)
        try:
            completion = parse_completion(body)
        except MalformedBody as exc:
            raise Transient("malformed_body", str(exc)) from None
        if self.cfg.require_reasoning and not completion.reasoning:
            raise Transient("empty_reasoning", "the answer has no reasoning (none of reasoning, "
                            "reasoning_content, <think> tags)")
        return Answer(completion, endpoint.url, attempts, latency)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
