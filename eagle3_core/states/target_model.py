"""The one way eagle3 loads the target model: for extract's transformers engine, the online
engines, the in-trainer reader (train.mode online) and offline evaluation alike.

It honours ``target.trust_remote_code``: a target that ships its own modeling module (Kimi's)
loads only with it, and a copy that forgets it fails there alone (it did: the trainer's reader and
offline evaluation loaded without it). Weights load in bf16 on a GPU and fp32 on CPU (CPU bf16
matmuls are slow and inexact) unless the caller names a dtype, spread over the machine's GPUs
(``device_map="auto"``) when they exceed 80% of one GPU's free memory (``target_size.FIT_SHARE``).
It does not size the target: each caller asks ``target_size`` first, before the load, so that a
target too large is one error naming that stage's alternative rather than the out-of-memory killer.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.states.target_size import FIT_SHARE


def _weights_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.safetensors")) or sum(
        f.stat().st_size for f in path.glob("*.bin")
    )


def load_target_model(path: str | Path, trust_remote_code: bool, device: str = "cpu", dtype=None):
    """The target's causal LM in eval mode with frozen weights, on ``device`` (a GPU map when one GPU
    is too small). ``trust_remote_code`` is the recipe's ``target.trust_remote_code``."""
    import torch
    from transformers import AutoModelForCausalLM

    if dtype is None:
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
    kwargs: dict = {"dtype": dtype, "trust_remote_code": trust_remote_code}
    if str(device).startswith("cuda") and torch.cuda.device_count() > 1:
        free, _ = torch.cuda.mem_get_info(0)
        if _weights_bytes(Path(path)) > FIT_SHARE * free:
            kwargs["device_map"] = "auto"
    model = AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    if "device_map" not in kwargs:
        model.to(device)
    model.requires_grad_(False)
    return model.eval()
