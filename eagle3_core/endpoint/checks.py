"""The synchronous HTTP of the checks before a run: generate's probe and tools probe, and the pre-flight.

One ``httpx`` client with the endpoint's key (``api_key_env``) and a bounded timeout, and three
tries per request: a 503 while the server warms up should not stop the run. A status no retry
changes is raised at once, a refused key naming the variable that holds it; an endpoint that never
answers is ``Unreachable``.
"""

from __future__ import annotations

import time

from eagle3_core.endpoint.config import RequestConfig
from eagle3_core.errors import EndpointError

UNREACHABLE_FIX = "start the server (eagle3 serve) or fix --base-url (http://host:port/v1)"
PROBE_TRIES = 3  # a 503 while the server warms up should not stop the run


class Unreachable(EndpointError):
    """The endpoint did not answer (connection, 5xx, timeouts): left out while another answers."""


def probe_client(cfg: RequestConfig, timeout: float = 120.0):
    """The HTTP client of the checks before a run (this probe, the tools probe, the pre-flight): the
    endpoint's key from ``cfg.api_key_env`` when set, a bounded timeout."""
    import os

    import httpx

    key = os.environ.get(cfg.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(timeout=min(cfg.request_timeout, timeout), headers=headers)


def list_models(http, url: str, key_env: str = "OPENAI_API_KEY") -> list[str]:
    return [m.get("id") for m in listed_models(http, url, key_env)]


def listed_models(http, url: str, key_env: str) -> list[dict]:
    """The entries of ``/models`` (vLLM's carry ``max_model_len``)."""
    response = send(http, "GET", f"{url.rstrip('/')}/models", key_env)
    return [m for m in response.get("data", []) if isinstance(m, dict)]


def chat(http, url: str, payload: dict, key_env: str = "OPENAI_API_KEY") -> dict:
    body = send(http, "POST", f"{url.rstrip('/')}/chat/completions", key_env, json=payload)
    if not body.get("choices") or not isinstance(body["choices"][0].get("message"), dict):
        raise EndpointError(
            f"{url} answered the probe without choices[0].message", fix="is this an OpenAI-compatible chat endpoint?"
        )
    return body


def send(http, method: str, url: str, key_env: str, **kwargs) -> dict:
    import httpx

    last = ""
    for attempt in range(PROBE_TRIES):
        try:
            response = http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            last = f"cannot reach {url}: {type(exc).__name__}: {exc}"
        else:
            if response.status_code < 400:
                try:
                    return response.json()
                except ValueError:
                    last = f"{url} answered with a body that is not JSON"
            else:
                refused(response, url, key_env)
                last = f"{url} answered HTTP {response.status_code}"
        time.sleep(0.5 * (attempt + 1))
    raise Unreachable(last, fix=UNREACHABLE_FIX)


def refused(response, url: str, key_env: str) -> None:
    """Raise for a status no retry changes: a refused key names the setting that holds it."""
    code, text = response.status_code, " ".join(response.text[:300].split())
    if code in (401, 403, 407):
        raise EndpointError(
            f"{url} refused the key (HTTP {code}: {text})",
            fix=f"set the endpoint's API key in the environment variable {key_env} "
            "(generate.api_key_env names the variable)",
        )
    if code < 500 and code not in (408, 409, 425, 429):
        raise EndpointError(f"{url} answered HTTP {code}: {text}", fix="check --base-url (it ends in /v1) and --model")
