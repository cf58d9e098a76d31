"""Serve a local model with real vLLM on loopback: ``VLLMServer`` and ``serve_model``.

Standard library only at import time (vLLM runs in its own environment, as a subprocess).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from eagle3_core.serve.config import ServeConfig
from eagle3_core.serve.locate import check_vllm, vllm_python
from eagle3_core.serve.vllm_server import EngineRefused, PortTaken, ServeError, VLLMServer
from eagle3_core.target.config import TargetConfig

__all__ = [
    "EngineRefused",
    "PortTaken",
    "ServeConfig",
    "ServeError",
    "VLLMServer",
    "check_vllm",
    "serve_model",
    "vllm_python",
]


@contextlib.contextmanager
def serve_model(
    target: TargetConfig,
    cfg: ServeConfig | None = None,
    *,
    speculative_config: dict | None = None,
    extra_args: list[str] | None = None,
    log_dir: str | None = None,
) -> Iterator[str]:
    """Serve ``target.path`` with the family's parsers and tokenizer mode; yield the base URL
    (``.../v1``) and stop the server on exit, whatever happens inside the block."""
    server = VLLMServer.for_target(
        target,
        cfg,
        speculative_config=speculative_config,
        extra_args=extra_args,
        log_dir=log_dir,
    )
    with server:
        yield server.base_url
