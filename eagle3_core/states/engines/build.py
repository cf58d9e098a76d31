"""One hidden-state engine built from its settings: the one place that chooses vLLM or transformers.

Extract (``extract/engine_cache.py``, one cached per process) and online training (``train/online_engine.py``,
one behind a spool) both build theirs here, so the two stages load a target the same way. The
transformers engine sizes the target before loading it (``states.target_size``): one ``ConfigError``
naming the vLLM engine where it cannot fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from eagle3_core.states.engines.vllm_engine import VllmOptions

# A target the transformers engine cannot hold (sized before the load: ``states.target_size``).
TOO_LARGE = (
    "use the vLLM engine, which serves a target over all its GPUs: extract.engine: vllm "
    "(`eagle3 extract --engine vllm`), or train.online_vllm.engine: vllm for online-vllm training"
)


def build_engine(
    engine: Literal["vllm", "transformers"],
    target,
    layers: list[int],
    num_hidden_layers: int,
    longest: int,
    workdir: Path,
    *,
    vllm: VllmOptions,
    device: str,
    max_tokens_per_batch: int,
    devices: str | None = None,
):
    """The engine for ``target`` (a ``TargetConfig``) and samples of at most ``longest`` tokens:
    vLLM's (started with ``vllm``, working and logging in ``workdir``, on ``devices`` when set),
    or transformers' on ``device`` batching ``max_tokens_per_batch`` tokens a forward."""
    if engine == "vllm":
        from eagle3_core.states.engines.vllm_engine import VllmEngine

        return VllmEngine(
            vllm, target, layers, num_hidden_layers, max_model_len=longest + 1, workdir=workdir, devices=devices
        )
    from eagle3_core.states.engines.hf_engine import TransformersEngine
    from eagle3_core.states.target_model import load_target_model
    from eagle3_core.states.target_size import check_target_fits
    from eagle3_core.target.hardware import resolve_device

    on = resolve_device(device)
    check_target_fits(target.require_path(), on, None, what="the transformers hidden-state engine", fix=TOO_LARGE)
    model = load_target_model(target.require_path(), target.trust_remote_code, on)
    return TransformersEngine(model, layers, on, max_tokens_per_batch)
