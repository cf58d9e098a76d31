"""OpenAI-compatible chat endpoints, below every stage that sends requests (generate, evaluate, the pre-flight).

``config.RequestConfig``: what a request carries and how failures are retried; ``client``: the
async requests with retries, breakers and parsing (``answer_all`` for callers that want answers,
not a dataset), and ``run_coroutine``; ``concurrency`` and ``health``: slots and breakers per
endpoint; ``checks``: the synchronous client of the checks before a run; ``redact``: the key kept
out of every message.
"""
