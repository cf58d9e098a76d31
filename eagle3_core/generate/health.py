"""Whether the endpoints are down: an outage fails the run instead of rejecting the rest of it.

Retries cover a failure of minutes at most (``max_retries`` backoffs); past that every prompt the
engine starts fails each attempt and becomes a reject, at 128 in flight thousands of them in a
10-minute outage. So the run stops once the servers look down, keeping what finished; the rejects
the outage already made are server failures, which a rerun sends again (``shards.read_persisted``).

"Down" is two things at once, so that slow answers never look like an outage (a 10K-token answer
takes minutes, and the first answers of a run come late): no answer from any endpoint for
``outage_seconds``, and at least ``min_failures`` attempts failed with a server failure since the
last answer (one endpoint's worth of in-flight requests: a stray timeout is not an outage). A
run whose input ends while the endpoints fail (no answer since ``min_failures`` failures) is down
at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

RETRY_STATUS = {408, 409, 425, 429}  # HTTP codes a server sends when it is busy, not when a request is wrong


def is_server_failure(reason: str) -> bool:
    """A reject reason that says the server failed (not the prompt or the answer): a rerun resends it."""
    if reason in ("connection", "timeout"):
        return True
    code = reason.removeprefix("http_")
    return code.isdigit() and (int(code) in RETRY_STATUS or int(code) >= 500)


class ServerHealth:
    def __init__(self, outage_seconds: float, min_failures: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.outage_seconds, self.min_failures, self.clock = outage_seconds, min_failures, clock
        self.last_answer = clock()  # the probe just answered
        self.failures = 0  # server failures since the last answer
        self.last_failure = ""

    def answered(self) -> None:
        self.last_answer, self.failures = self.clock(), 0

    def failed(self, reason: str, detail: str) -> None:
        if not is_server_failure(reason):
            return self.answered()  # a 400 or an answer without reasoning: the server is up
        self.failures += 1
        self.last_failure = detail

    def outage(self, ended: bool = False) -> str | None:
        """Why the endpoints count as down, or None. Once every prompt has had its turn (``ended``)
        the failures alone decide: waiting out ``outage_seconds`` there would only let the run end
        complete with the outage's rejects in it, which a complete run never sends again."""
        silent = self.clock() - self.last_answer
        if self.failures < self.min_failures or (silent < self.outage_seconds and not ended):
            return None
        return (
            f"no endpoint has answered for {silent:.0f} s and {self.failures} attempts failed meanwhile "
            f"(last: {self.last_failure})"
        )
