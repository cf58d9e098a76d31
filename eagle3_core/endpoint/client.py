"""One chat request with its retries: AsyncOpenAI, non-streaming, token ids when asked.

Retried (``max_retries`` times, exponential backoff with full jitter): every open-class failure
(``health.is_open``: timeouts, dropped connections, 5xx, 401/403/407/408/409/425/429, bodies
that are not JSON or hold no choices) and the answers that may differ on another try (an empty
reasoning when reasoning is required, a body that breaks the contract). Any other 4xx (a prompt
too long) fails that row at once: ``RequestFailed`` with the code. Each attempt takes a slot on
the least-loaded endpoint whose breaker admits it and gives it back before the backoff, so a
retry waiting to be sent holds no slot. A failure that opens its endpoint's breaker (or meets it
open) is the endpoint's: the prompt is sent again elsewhere at once, its retries untouched; so is
every other request in flight there when the breaker opens (cancelled: a hanging server would
hold each for ``request_timeout``). A request in flight past its endpoint's overdue bound
(``health.overdue_after``) while the endpoint answers nothing counts toward its breaker
(``check_overdue``); once the endpoint holds ``min(breaker_failures, its bound)`` such requests the
breaker opens and they move too, once each: a moved request is never judged overdue again, so a
prompt whose answer is merely long cannot be moved for ever. An open breaker gets ``probe``, one
short request with ``breaker_probe_timeout``, never a user's prompt.

Not stored, whatever the status: an answer from another model than the one asked for (its
``model`` neither the requested name nor a name the endpoint lists for the same model) is an
open ``wrong_model`` failure that opens the endpoint's breaker at once; an answer holding the API
key's value is a final ``secret_in_answer`` reject. Both, a refused key, a hung endpoint and
``reasoning`` / ``reasoning_content`` that disagree each get one warning line per endpoint.

``request_timeout`` is a deadline on the whole attempt, body included (``asyncio.timeout``), not
only httpx's per-read timeout: a body that trickles in past it is abandoned and counted as a
``timeout``, never accepted cut short.

The request goes through the client's generic ``post`` with the JSON payload as is, and the body
comes back raw and is JSON-decoded here: the typed ``chat.completions.create`` walks every
message through its TypedDict transform and builds pydantic models, which would file vLLM's
extra fields (``prompt_token_ids``, ``choices[].token_ids``) under ``model_extra`` and cost more
CPU per request than the whole raw path (the per-request CPU figures: benchmarks/generate.md).

One endpoint gets several clients of ``CONNECTIONS_PER_CLIENT`` connections each: httpx's pool
checks all of its connections (a poll syscall each) for every request; with one pool of 128
that took a third of the profiled time.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from eagle3_core.chat.parse import Completion, MalformedBody, parse_completion
from eagle3_core.endpoint.concurrency import Endpoint, EndpointPool
from eagle3_core.endpoint.config import RequestConfig
from eagle3_core.endpoint.health import (
    ACCESS_STATUS,
    OVERDUE_FACTOR,
    Breaker,
    SharedFailure,
    is_final_status,
    is_open,
    overdue_after,
)
from eagle3_core.endpoint.redact import redact, secret_of

CONNECTIONS_PER_CLIENT = 8
JSON_HEADERS = {"Content-Type": "application/json"}
MOVED = "moved"  # the retry reason of a request cancelled in flight as its endpoint's breaker opened
PROBE_MESSAGES = [{"role": "user", "content": "What is 2 + 3? Think briefly, then answer."}]
WARNING = "generate: warning: "


class Transient(Exception):
    """A failure worth another attempt; ``reason`` is the code recorded if attempts run out."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


class RequestFailed(Exception):
    """A failure no retry can fix (or retries ran out): the row is rejected with ``reason``;
    ``last`` is the last attempt's own words (``detail`` adds the attempt count)."""

    def __init__(self, reason: str, detail: str, attempts: int, last: str | None = None) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.attempts = reason, detail, attempts
        self.last = detail if last is None else last


class Moved(Exception):
    """The endpoint failed, not the prompt (its breaker opened): send again, no retry spent.
    ``overdue``: it was moved for taking long, so it is never judged overdue again."""

    def __init__(self, reason: str, overdue: bool = False) -> None:
        super().__init__(reason)
        self.overdue = overdue


@dataclass(frozen=True)
class Answer:
    completion: Completion
    endpoint: str
    attempts: int
    latency_s: float  # of the successful attempt


def build_clients(url: str, cfg: RequestConfig, max_connections: int) -> list:
    """AsyncOpenAI clients for one endpoint, ``CONNECTIONS_PER_CLIENT`` connections each; our
    retries replace the client's own."""
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    http = _http_module()
    per_client = min(CONNECTIONS_PER_CLIENT, max_connections)
    limits = http.Limits(max_connections=per_client, max_keepalive_connections=per_client)
    ssl_context = http.create_ssl_context()  # one for all: loading CA certificates costs ~50 ms each
    key = os.environ.get(cfg.api_key_env) or "EMPTY"
    return [
        AsyncOpenAI(
            base_url=url,
            api_key=key,
            timeout=cfg.request_timeout,
            max_retries=0,
            http_client=DefaultAsyncHttpxClient(limits=limits, timeout=cfg.request_timeout, verify=ssl_context),
        )
        for _ in range(-(-max_connections // per_client))
    ]


def _http_module():
    """The HTTP library the installed openai client is built on (httpx2 in openai 3, else httpx)."""
    try:
        import httpx2 as http
    except ImportError:
        import httpx as http
    return http


def request_body(
    cfg: RequestConfig,
    model: str,
    messages: list[dict],
    max_tokens: int | None = None,
    tools: list[dict] | None = None,
) -> dict:
    """The JSON payload of one chat request: sampling settings from the config, the target's
    chat settings (``target.chat``: the detokenizer flags and ``reasoning_effort`` at the top level,
    where vLLM and SGLang read them, template variables in ``chat_template_kwargs``), the row's
    tools, then extra_body."""
    payload = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens or cfg.max_tokens,
        "temperature": cfg.temperature,
        **cfg.chat.request_fields(),
    }
    if tools:
        payload["tools"] = tools
    if cfg.top_p is not None:
        payload["top_p"] = cfg.top_p
    if cfg.seed is not None:
        payload["seed"] = cfg.seed
    payload.update(cfg.extra_body)
    if cfg.return_token_ids:
        payload["return_token_ids"] = True
    return payload


async def post_chat(endpoint: Endpoint, payload: bytes) -> dict:
    """One attempt: the decoded JSON body, or ``Transient`` / ``RequestFailed``."""
    import openai

    index = min(range(len(endpoint.clients)), key=endpoint.client_load.__getitem__)
    endpoint.client_load[index] += 1
    try:
        response = await endpoint.clients[index].post(
            "/chat/completions", content=payload, cast_to=_http_module().Response, options={"headers": JSON_HEADERS}
        )
    except openai.APITimeoutError as exc:
        raise Transient("timeout", f"no answer within the request timeout ({exc})") from None
    except openai.APIConnectionError as exc:
        raise Transient("connection", f"connection failed: {exc.__cause__ or exc}") from None
    except openai.APIStatusError as exc:
        code = exc.status_code
        detail = f"HTTP {code}: {_short(exc.message)}"
        if is_final_status(code):
            raise RequestFailed(f"http_{code}", detail, attempts=1) from None
        raise Transient(f"http_{code}", detail) from None
    finally:
        endpoint.client_load[index] -= 1
    try:
        return json.loads(response.content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        text = response.content[:200].decode("utf-8", errors="replace")
        raise Transient("not_json", f"the response is not JSON: {_short(text)}") from None


def open_clients(endpoint: Endpoint, cfg: RequestConfig) -> None:
    """Give ``endpoint`` its clients for the running event loop (they cannot outlive it)."""
    endpoint.clients = build_clients(endpoint.url, cfg, endpoint.controller.max)
    endpoint.client_load = [0] * len(endpoint.clients)


async def close_clients(endpoint: Endpoint) -> None:
    for client in endpoint.clients:
        await client.close()


async def answer_all(
    cfg: RequestConfig,
    model: str,
    base_url: str,
    prompts: list[list[dict]],
    on_answer: Callable[[], None] | None = None,
) -> list:
    """Every prompt through one endpoint with the stage's own requests, retries and parsing,
    ``cfg.concurrency`` in flight; a prompt that fails for good comes back as its exception.
    ``on_answer()`` is called as each prompt settles, answered or failed. For callers that want
    answers, not a dataset (evaluation)."""
    from eagle3_core.endpoint.concurrency import controller_for

    # a breaker that never opens: no outage watcher runs here, so each prompt's retries decide
    endpoint = Endpoint(
        base_url, controller_for(cfg), breaker=Breaker(1 << 30, cfg.breaker_backoff, cfg.breaker_backoff)
    )
    open_clients(endpoint, cfg)
    requester = Requester(cfg, model, EndpointPool([endpoint]))

    async def settled(messages: list[dict]):
        try:
            return await requester.answer(messages)
        finally:
            if on_answer is not None:
                on_answer()

    try:
        return await asyncio.gather(*(settled(m) for m in prompts), return_exceptions=True)
    finally:
        await close_clients(endpoint)


class Requester:
    """Sends one prompt through the pool until it succeeds, fails for good, or retries run out.

    ``backoff(seconds)`` is awaited between attempts with no slot held; the engine's version also
    lets a new prompt take the waiting one's place in its window. ``stop(error)`` is called when
    every request fails the same way (``health.SharedFailure``, judged on each prompt's first
    answer; ``ruled_out``: reasons the probe has shown are no setting's); the engine stops the run.
    """

    def __init__(
        self,
        cfg: RequestConfig,
        model: str,
        pool: EndpointPool,
        on_retry=None,
        backoff: Callable[[float], Awaitable[None]] = asyncio.sleep,
        ruled_out: frozenset[str] = frozenset(),
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.cfg, self.model, self.pool = cfg, model, pool
        self.on_retry = on_retry or (lambda reason: None)
        self.backoff = backoff
        self.shared = SharedFailure(cfg.shared_failure_attempts, ruled_out)
        self.stop: Callable[[str], None] = lambda error: None
        self.secret = secret_of(cfg.api_key_env)
        self.warn = warn or (lambda line: None)
        self._warned: set[tuple[str, str]] = set()  # (endpoint, what): one line each per run
        self._probe_payload = json.dumps(request_body(cfg, model, PROBE_MESSAGES, cfg.probe_max_tokens)).encode()

    def warn_once(self, url: str, what: str, line: str) -> None:
        if (url, what) not in self._warned:
            self._warned.add((url, what))
            self.warn(WARNING + line)

    async def answer(self, messages: list[dict], tools: list[dict] | None = None) -> Answer:
        # serialised once here, not once per attempt by the client (which deep-copies a dict body)
        body = request_body(self.cfg, self.model, messages, tools=tools)
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        attempts = spent = 0  # attempts sent; those that spent one of the prompt's retries
        judged = False  # this prompt's first answer went to the shared-failure judge
        patient = False  # moved once for taking long: never judged overdue again
        while True:
            attempts += 1
            try:
                return await self._watched_attempt(payload, attempts, patient)
            except Moved as moved:
                patient = patient or moved.overdue
                self.on_retry(str(moved))
            except Transient as exc:
                judged = self._judge(exc, judged)
                spent += 1
                if spent > self.cfg.max_retries:
                    detail = f"{exc.detail} (after {attempts} attempts)"
                    raise RequestFailed(exc.reason, detail, attempts, exc.detail) from None
                self.on_retry(exc.reason)
                await self.backoff(self.wait_before(spent + 1))
            except RequestFailed as exc:
                self._judge(exc, judged)
                exc.attempts = attempts
                raise

    def _judge(self, exc: Transient | RequestFailed, judged: bool) -> bool:
        """A prompt's first answer goes to the shared-failure judge, its retries never (``health.SharedFailure``);
        True once this prompt's first answer was judged."""
        if judged or not self.shared.counts(exc.reason):
            return judged
        if self.shared.failed(exc.reason, exc.detail if isinstance(exc, Transient) else exc.last):
            self.stop(self.shared.error())
        return True

    async def _watched_attempt(self, payload: bytes, attempts: int, patient: bool = False) -> Answer:
        """One attempt on the next admitted endpoint; its outcome goes to that endpoint's breaker
        (before the slot is released, so a waiter sees the new state) and to the shared-failure
        streak. Server text is redacted here, where it enters."""
        endpoint = await self.pool.acquire()
        task = asyncio.current_task()
        endpoint.attempts[task] = math.inf if patient else time.monotonic()
        try:
            answer = await self._attempt(endpoint, payload, attempts)
        except asyncio.CancelledError:
            if task not in endpoint.moving:
                raise
            endpoint.moving.discard(task)
            if task.uncancel() > 0:  # the run is stopping as well
                raise
            raise Moved(MOVED, overdue=task in endpoint.overdue) from None
        except (Transient, RequestFailed) as exc:
            exc.detail = redact(exc.detail, self.secret)
            if isinstance(exc, RequestFailed):
                exc.last = redact(exc.last, self.secret)
            self._failed(endpoint, exc)
            raise
        else:
            endpoint.breaker.answered()
            endpoint.last_answer_at = time.monotonic()
            self.shared.answered()
            return answer
        finally:
            endpoint.attempts.pop(task, None)
            endpoint.overdue.discard(task)
            await self.pool.release(endpoint)

    def _failed(self, endpoint: Endpoint, exc: Transient | RequestFailed) -> None:
        if not is_open(exc.reason):  # the server answered this prompt: it is up
            endpoint.breaker.answered()
            endpoint.last_answer_at = time.monotonic()
        elif endpoint.breaker.failed(exc.reason, exc.detail, at_once=exc.reason == "wrong_model"):
            self._warn_refusal(endpoint.url, exc.reason, exc.detail)
            move_in_flight(endpoint)
            raise Moved(exc.reason) from None

    def _warn_refusal(self, url: str, reason: str, detail: str) -> None:
        """One line for an endpoint that is up and refuses (a key, another model): unlike a dead
        one, it will not come back by itself."""
        code = reason.removeprefix("http_")
        if reason == "wrong_model":
            self.warn_once(url, reason, f"{detail}; no request goes there while it does")
        elif code.isdigit() and int(code) in ACCESS_STATUS:
            self.warn_once(
                url,
                "key",
                f"{url} refuses the key ({detail}); no request goes there while it does: "
                f"set its key in {self.cfg.api_key_env}",
            )

    async def probe(self, endpoint: Endpoint) -> None:
        """An open breaker's half-open probe: one short request of the run's own (``PROBE_MESSAGES``)
        within ``breaker_probe_timeout``. An answer as the model asked for (or a 4xx about the
        probe: the server is up) closes the breaker; anything else opens it again, for longer."""
        deadline = min(self.cfg.breaker_probe_timeout, self.cfg.request_timeout)
        try:
            async with asyncio.timeout(deadline):
                body = await post_chat(endpoint, self._probe_payload)
            if not isinstance(body, dict) or not body.get("choices"):
                raise Transient("no_choices", f"the probe's answer holds no choices: {_short(json.dumps(body))}")
            self._check_model(endpoint, body)
        except TimeoutError:
            endpoint.breaker.failed("timeout", f"no answer to a probe within {deadline:g} s")
        except (Transient, RequestFailed) as exc:
            if is_open(exc.reason):
                endpoint.breaker.failed(exc.reason, redact(exc.detail, self.secret))
            else:
                endpoint.breaker.answered()
        else:
            endpoint.breaker.answered()

    def wait_before(self, attempt: int) -> float:
        """Exponential backoff with full jitter: uniform in [0, min(max, initial * 2^(attempt-2))]."""
        return random.uniform(0, min(self.cfg.retry_max_wait, self.cfg.retry_initial_wait * 2 ** (attempt - 2)))

    async def _attempt(self, endpoint: Endpoint, payload: bytes, attempts: int) -> Answer:
        start = time.monotonic()
        try:
            async with asyncio.timeout(self.cfg.request_timeout):
                body = await post_chat(endpoint, payload)
        except TimeoutError:
            endpoint.controller.on_timeout()
            raise Transient(
                "timeout", f"no whole answer within the request timeout ({self.cfg.request_timeout:g} s)"
            ) from None
        except Transient as exc:
            if exc.reason == "timeout":
                endpoint.controller.on_timeout()
            raise
        latency = time.monotonic() - start
        endpoint.controller.on_success(latency)
        endpoint.recent.append(latency)
        return Answer(self._completion(body, endpoint), endpoint.url, attempts, latency)

    def _completion(self, body: object, endpoint: Endpoint) -> Completion:
        """The answer in ``body``, or why it is none: no choices (open: a server's bad moment),
        another model's answer (the endpoint's failure), a contract broken (worth a retry), the key
        in the answer, no reasoning where it is required."""
        if not isinstance(body, dict) or not body.get("choices"):
            raise Transient("no_choices", f"the response holds no choices: {_short(json.dumps(body))}")
        self._check_model(endpoint, body)
        try:
            completion = parse_completion(body)
        except MalformedBody as exc:
            raise Transient("bad_body", str(exc)) from None
        if self.secret and any(self.secret in text for text in _answer_texts(completion)):
            raise RequestFailed(
                "secret_in_answer", f"the answer holds the value of {self.cfg.api_key_env}: never stored", attempts=1
            )
        if completion.fields_disagree:
            self.warn_once(
                endpoint.url,
                "fields",
                f"{endpoint.url} sends `reasoning` and `reasoning_content` that differ; "
                "reading `reasoning` (the field vLLM >= 0.16 fills): check the server's reasoning parser",
            )
        if self.cfg.require_reasoning and not completion.reasoning and not completion.tool_calls:
            raise Transient(
                "empty_reasoning", "the answer has no reasoning (none of reasoning, reasoning_content, <think> tags)"
            )
        return completion

    def _check_model(self, endpoint: Endpoint, body: dict) -> None:
        """``wrong_model`` when the answer names a model this endpoint does not serve the asked one as."""
        said = body.get("model")
        if endpoint.model_names and said is not None and said not in endpoint.model_names:
            raise Transient("wrong_model", wrong_model_words(endpoint.url, said, self.model))


def wrong_model_words(url: str, said: object, model: str) -> str:
    return f"{url} answers as model {said!r}, not {model!r}: its answers are another model's, never stored"


def _answer_texts(completion: Completion) -> tuple[str, ...]:
    calls = json.dumps(completion.tool_calls, ensure_ascii=False) if completion.tool_calls else ""
    return completion.reasoning, completion.content, calls


def check_overdue(endpoint: Endpoint, cfg: RequestConfig, now: float) -> str | None:
    """Count the endpoint's requests newly past its overdue bound toward its breaker, while it
    answers nothing (a long answer on a live endpoint is not a hang); the words of the failure
    when its breaker opened, and the requests in flight there moved."""
    bound = overdue_after(list(endpoint.recent), cfg.request_timeout, cfg.overdue_min_seconds)
    quiet = endpoint.breaker.state == "closed" and now - endpoint.last_answer_at > bound
    late = [task for task, start in endpoint.attempts.items() if now - start > bound and task not in endpoint.moving]
    new = [task for task in late if task not in endpoint.overdue]
    if not (quiet and new):
        return None
    endpoint.overdue.update(new)
    detail = (
        f"{len(late)} requests in flight for over {bound:.0f} s ({OVERDUE_FACTOR:g}x its slowest recent answer) "
        "and no answer meanwhile"
    )
    # each newly overdue request is one failure; holding as many as the endpoint may hold opens it now
    at_once = len(late) >= min(endpoint.breaker.failures, endpoint.bound)
    if any([endpoint.breaker.failed("overdue", detail, at_once=at_once) for _ in new]):
        move_in_flight(endpoint)
        return f"{endpoint.url} stopped answering: {detail}"
    return None


def move_in_flight(endpoint: Endpoint) -> None:
    """The endpoint's breaker is open: a request in flight there (a server that took it and hangs)
    would otherwise wait out ``request_timeout``. Each is cancelled, and its prompt is sent again at
    once elsewhere, its retries untouched (``Moved``, counted as a ``moved`` retry)."""
    current = asyncio.current_task()
    for task in set(endpoint.attempts) - endpoint.moving - {current}:
        endpoint.moving.add(task)
        task.cancel()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def run_coroutine(coro: Coroutine) -> Any:
    """``asyncio.run``, also from a thread that already runs a loop (some Prefect task runners)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    context = contextvars.copy_context()  # settings such as Prefect's API URL live in context variables
    thread = threading.Thread(target=context.run, args=(target,), name="eagle3-requests")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")
