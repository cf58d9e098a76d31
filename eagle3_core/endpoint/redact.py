"""The API key's value never leaves the process in a server's text.

A server may echo the key (a gateway's 401 page quoting the ``Authorization`` header). Every
server text eagle3 keeps or prints passes through ``redact`` where it enters (``client.py``,
generate's ``probe.py``), so reject details, error lines, logs, artifacts and the Prefect database never
hold it. Keys shorter than ``MIN_SECRET`` (``EMPTY``, a placeholder) are not secrets, and
replacing them would garble ordinary words.
"""

from __future__ import annotations

import os

MIN_SECRET = 8
MASK = "[redacted]"


def secret_of(env: str) -> str | None:
    """The key held in environment variable ``env``, when it is long enough to be one."""
    value = os.environ.get(env) or ""
    return value if len(value) >= MIN_SECRET else None


def redact(text: str, secret: str | None) -> str:
    return text.replace(secret, MASK) if secret and secret in text else text
