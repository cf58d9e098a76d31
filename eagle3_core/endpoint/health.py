"""Which failures settle a prompt, and which endpoints are up.

Guarantees:

- **A prompt is settled only by its own answer.** A reject is *final* only when the server
  answered this prompt and the answer is the reason (``FINAL``): an empty reasoning after its
  retries, a 4xx that names the prompt, a body that parses but breaks the contract. Every failure
  of a server or of the path to it is *open* (``is_open``): its row is kept with its reason, a
  run that ends with open rows ends failed, and the next run in the folder sends them again.
- **One endpoint at a time** (``Breaker``): ``failures`` open-class failures in a row open an
  endpoint's breaker; no request goes to it until a backoff (``backoff`` doubling up to
  ``max_backoff``) has passed, then the engine sends it one short probe of its own (half-open;
  never a user's prompt, never waited on by the run's end): an answer closes it, a failure opens
  it again for twice as long. A failure that opens (or finds open) the breaker is the
  endpoint's, not the prompt's: it costs the prompt no retry, so the prompt moves to a healthy
  endpoint. An answer from another model (``wrong_model``) opens it at once.
- **A hung endpoint costs one bound, not the timeout** (``overdue_after``): a request in flight
  past ``OVERDUE_FACTOR`` times the slowest of the endpoint's recent answers (at least
  ``overdue_min_seconds``), while the endpoint answers nothing, counts as one failure there, and once every request the endpoint may hold
  is overdue (or ``failures`` are) its breaker opens and they move, without waiting out
  ``request_timeout``. The request itself goes on: an answer that comes late is still taken.
- **An outage** (``Outage``) is every endpoint's breaker open for ``outage_seconds`` together:
  the run stops, keeping what finished. While some endpoints are down and one answers, the run
  goes on at the healthy endpoints' pace; prompts wait, they are never rejected for it.
- **A failure every request shares** (``SharedFailure``): ``attempts`` distinct prompts in a row
  whose first answer failed with the same reason and the same words (a 400 for a setting, a
  revoked key, a gateway's HTML page) stop the run at once, quoting the server; the rows of that
  streak are not final. A prompt's retries never count, so a few hopeless prompts retrying at the
  run's tail are settled final, not taken for a setting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

BUSY_STATUS = {408, 409, 425, 429}  # the server is busy, not the request wrong
ACCESS_STATUS = {401, 403, 407}  # the key or a proxy refused: the same prompt passes with a good key

# reason -> (class, why); the table in docs/troubleshooting.md. ``http_5xx`` etc. stand for their codes.
REASONS: dict[str, tuple[str, str]] = {
    "connection": ("open", "the connection failed or dropped"),
    "timeout": ("open", "no whole answer within request_timeout"),
    "http_5xx": ("open", "the server failed"),
    "http_408/409/425/429": ("open", "the server was busy"),
    "http_401/403/407": ("open", "the key or a proxy refused the request"),
    "not_json": ("open", "the body is not JSON (a gateway's HTML page, a truncated body)"),
    "no_choices": ("open", "a JSON body without choices (choices: [] with HTTP 200)"),
    "shared_failure": ("open", "every request failed the same way (a setting, not the prompt)"),
    "wrong_model": ("open", "the endpoint answered as another model than the one asked for"),
    "empty_reasoning": ("final", "the answer had no reasoning, after its retries"),
    "secret_in_answer": ("final", "the answer holds the API key's value: never stored"),
    "bad_body": ("final", "the body parses but breaks the contract (choices[0].message not an object)"),
    "http_4xx": ("final", "any other 4xx: the server named this prompt (its length against the context)"),
    "input reasons": ("final", "unknown_shape, invalid_json, undecodable, ...: the row itself"),
}
OPEN_REASONS = {"connection", "timeout", "not_json", "no_choices", "shared_failure", "wrong_model"}
OVERDUE_FACTOR = 3.0  # a request this many times slower than the endpoint's slowest recent answer is overdue


def is_open(reason: str) -> bool:
    """Whether a reject with ``reason`` is left open (the server failed, not the prompt)."""
    if reason in OPEN_REASONS:
        return True
    code = reason.removeprefix("http_")
    return code.isdigit() and (int(code) in BUSY_STATUS | ACCESS_STATUS or int(code) >= 500)


def is_final_status(code: int) -> bool:
    """An HTTP status that settles the prompt (a 4xx about it), not retried."""
    return 400 <= code < 500 and code not in BUSY_STATUS | ACCESS_STATUS


class Breaker:
    """One endpoint's circuit breaker: ``closed`` -> ``open`` -> ``half_open`` -> closed or open."""

    def __init__(
        self, failures: int, backoff: float, max_backoff: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.failures, self.backoff, self.max_backoff, self.clock = failures, backoff, max_backoff, clock
        self.state = "closed"
        self.in_a_row = 0  # open-class failures since the last answer
        self.wait = backoff  # the next open period
        self.reopen_at = 0.0
        self.probing = False  # the half-open probe is in flight
        self.down_since: float | None = None
        self.last_failure = ""
        self.last_reason = ""
        self.opened = 0  # how many times it opened (for the manifest)

    def admits(self) -> bool:
        """May a user's request go here now? Only while closed: an open one gets the engine's probe."""
        return self.state == "closed"

    def probe_due(self) -> bool:
        """Past its backoff an open breaker turns half-open, and the caller sends its one probe."""
        if self.state != "open" or self.clock() < self.reopen_at:
            return False
        self.state, self.probing = "half_open", True
        return True

    def answered(self) -> None:
        self.state, self.in_a_row, self.wait, self.probing, self.down_since = "closed", 0, self.backoff, False, None

    def failed(self, reason: str, detail: str, at_once: bool = False) -> bool:
        """One open-class failure here; True when it is the endpoint's (the breaker opened, was
        already open, or its probe failed), so the prompt keeps its retries. ``at_once``: a
        failure no other answer here would contradict (another model answering) opens it now."""
        self.last_reason, self.last_failure = reason, detail
        if self.state != "closed":
            if self.state == "half_open":
                self.trip()
            return True
        self.in_a_row += 1
        if at_once or self.in_a_row >= self.failures:
            self.trip()
            return True
        return False

    def trip(self) -> None:
        """Open now (also for an endpoint down at the start); jitter spreads the probes of many runs."""
        now = self.clock()
        self.state, self.probing = "open", False
        self.reopen_at = now + self.wait * random.uniform(0.8, 1.0)
        self.wait = min(self.max_backoff, self.wait * 2)
        self.down_since = self.down_since if self.down_since is not None else now
        self.opened += 1

    def describe(self) -> str:
        if self.state == "closed" or self.down_since is None:
            return "up"
        return f"{self.state.replace('_', '-')} for {self.clock() - self.down_since:.0f} s"


class Outage:
    """Every endpoint down for ``outage_seconds`` together: the run stops."""

    def __init__(self, breakers: dict[str, Breaker], outage_seconds: float) -> None:
        self.breakers, self.outage_seconds = breakers, outage_seconds

    def why(self) -> str | None:
        states = list(self.breakers.values())
        if not states or any(b.state == "closed" for b in states):
            return None
        now = states[0].clock()
        together = now - max(now if b.down_since is None else b.down_since for b in states)
        if together < self.outage_seconds:
            return None
        each = "; ".join(f"{url}: {b.last_failure}" for url, b in self.breakers.items())
        return f"every endpoint has been down for {together:.0f} s ({each})"


def refused_everywhere(breakers: dict[str, Breaker]) -> str | None:
    """Every endpoint is open because it *answered* with a refusal (a 401, an HTML page, no
    choices): the servers are up and refuse every request, so waiting out ``outage_seconds``
    would change nothing. The run stops at once, quoting them."""
    states = list(breakers.values())
    if not states or any(b.state == "closed" or not _is_refusal(b.last_reason) for b in states):
        return None
    each = "; ".join(f"{url}: {b.last_failure}" for url, b in breakers.items())
    return f"every endpoint refuses every request ({each})"


def _is_refusal(reason: str) -> bool:
    code = reason.removeprefix("http_")
    return reason in ("not_json", "no_choices", "wrong_model") or (code.isdigit() and int(code) in ACCESS_STATUS)


class SharedFailure:
    """Whether the run's failures are the run's (a setting every request fails on) or a few prompts'.

    Judged over distinct prompts, each by its *first* answer: a prompt's retries never count, so
    the tail of a healthy run (only its hopeless prompts left, retrying) makes no streak, however
    long. A connection failure, a timeout or a 5xx is no answer (the breakers' and the outage's
    business): it neither counts nor breaks a streak. Reasons in ``ruled_out`` never count: the
    probe has shown that the endpoints reason under this run's settings, so an answer without
    reasoning is that prompt's own (some prompts are never reasoned on: a greeting, one word).
    Any answer breaks the streak. The run stops once ``attempts`` prompts in a row failed their
    first answer with the same reason and words (``failed`` returns True), and, at the end of a
    run with fewer prompts, when every prompt's first answer failed so (``every_answer``; the
    engine also asks that no row of the run was accepted, this time or by an earlier run).
    """

    def __init__(self, attempts: int, ruled_out: frozenset[str] = frozenset()) -> None:
        self.attempts, self.ruled_out = attempts, ruled_out
        self.signature: tuple[str, str] | None = None
        self.count = 0
        self.total = 0  # prompts whose first answer counted, this run
        self.answers = 0  # successful answers, this run

    def answered(self) -> None:
        self.answers += 1
        self.signature, self.count = None, 0

    def counts(self, reason: str) -> bool:
        """Whether a failure with ``reason`` is an answer that may be a setting's."""
        return not (reason in ("connection", "timeout") or _is_5xx(reason) or reason in self.ruled_out)

    def failed(self, reason: str, detail: str) -> bool:
        """One prompt's first answer failed; True once ``attempts`` prompts in a row failed the same way."""
        if not self.counts(reason):
            return False
        self.total += 1
        if (reason, detail) == self.signature:
            self.count += 1
        else:
            self.signature, self.count = (reason, detail), 1
        return self.count >= self.attempts

    def every_answer(self) -> bool:
        """Every prompt of the run failed its first answer this way and none was answered (a run
        shorter than ``attempts``)."""
        return self.signature is not None and self.count == self.total and self.count > 1 and not self.answers

    def error(self) -> str:
        reason, detail = self.signature or ("", "")
        return f"every request fails the same way: {self.count} prompts in a row were {reason}: {detail}"


def overdue_after(recent: list[float], request_timeout: float, floor: float) -> float:
    """Seconds after which a request in flight at an endpoint is overdue: ``OVERDUE_FACTOR`` times
    its slowest recent answer, at least ``floor``; before any answer, the timeout."""
    if not recent:
        return request_timeout
    return min(request_timeout, max(floor, OVERDUE_FACTOR * max(recent)))


def _is_5xx(reason: str) -> bool:
    code = reason.removeprefix("http_")
    return code.isdigit() and int(code) >= 500


def states(breakers: dict[str, Breaker]) -> dict[str, str]:
    """Each endpoint's state in words, for the progress artifact and the manifest."""
    return {url: breaker.describe() for url, breaker in breakers.items()}
