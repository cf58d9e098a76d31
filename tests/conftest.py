"""Session-wide fixtures. Expensive ones (the toy target, a vLLM server, a Prefect API) live in
tests/fixtures/ and are built once per session."""

import os

# Nothing in the test session may reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

# parallel first: its collection hook must run after requirements marks tests by fixture
# (tryfirst hooks run in reverse order of registration).
pytest_plugins = [
    "tests.fixtures.parallel",
    "tests.fixtures.requirements",
    "tests.fixtures.prefect",
    "tests.fixtures.fake_server",
    "tests.fixtures.toy",
    "tests.fixtures.vllm",
    "tests.fixtures.drafters",
]
