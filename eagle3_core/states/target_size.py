"""How much memory the target takes, from its ``config.json`` alone, and whether a device holds it.

Every stage that loads the target into its own process asks here first, before a byte of weights is
read: extract's transformers engine (``extract.engine: vllm`` is the alternative), online training's
reader (``train.mode: online-vllm``), evaluate's offline loop and by-context replay
(``evaluate.offline: false``). A target that cannot fit is one ``ConfigError`` naming the alternative
(evaluate leaves its offline passes out instead, with the same words), never the out-of-memory killer's
exit 137 minutes into a load.

The estimate is parameters x bytes of the dtype the stage loads in (fp32 on a CPU, bf16 on a GPU,
``load_dtype``). Parameters (``count_parameters``) of the language model (a multimodal config's
``text_config``; its vision tower, about 1% of such a model, is not counted): the embedding, the
``lm_head`` unless ``tie_word_embeddings``, and per layer the attention (q/k/v/o with
``num_key_value_heads`` and ``head_dim``; DeepSeek's MLA by its low-rank projections), the MLP
(gate/up/down; a MoE layer's ``n_routed_experts`` / ``num_experts`` / ``num_local_experts`` experts of
``moe_intermediate_size``, its shared experts and router, with the dense layers DeepSeek and Qwen-MoE
declare) and the norms. Biases are left out (well under 0.1%). A config without the shape keys gives
no estimate, and then nothing is refused.

A target fits when it needs at most ``FIT_SHARE`` (80%) of what the device has free now: the other
20% holds what a load keeps beside the weights (a forward's activations, the offline loop's KV cache,
the drafter, transformers' loading buffers); ``load_target_model`` spreads the weights over several
GPUs at the same share. Free memory: on a CPU the kernel's ``MemAvailable`` (/proc/meminfo: what it
can give without swapping; unknown off Linux, and then nothing is refused), on a GPU
``torch.cuda.mem_get_info``, summed over the GPUs when there are several (``load_target_model`` then
spreads the weights over all of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle3_core.contracts.target import CONFIG
from eagle3_core.errors import ConfigError

FIT_SHARE = 0.8
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")


@dataclass(frozen=True)
class TargetSize:
    """The target's estimated weights against one device's free memory (None: not known)."""

    parameters: int | None
    dtype: str
    device: str
    free: int | None

    @property
    def need(self) -> int | None:
        return None if self.parameters is None else self.parameters * DTYPE_BYTES[self.dtype]

    @property
    def fits(self) -> bool:
        return self.need is None or self.free is None or self.need <= FIT_SHARE * self.free

    def words(self) -> str:
        """The figures in one sentence, e.g. for an error or a plan line."""
        where = "the CPU" if self.device == "cpu" else self.device
        return (
            f"the target's {_count(self.parameters)} parameters need {_gb(self.need)} in {self.dtype} on {where}, "
            f"which has {_gb(self.free)} free (a load may take {FIT_SHARE:.0%} of it: the rest holds activations, "
            "caches and the loader's buffers)"
        )


def load_dtype(device: str) -> str:
    """The dtype a stage loads the target in on ``device``: bf16 on a GPU, fp32 on a CPU (CPU bf16
    matmuls are slow and inexact), as ``load_target_model`` does unless told otherwise."""
    return "float32" if str(device) == "cpu" else "bfloat16"


def target_size(path: str | Path, device: str, dtype: str | None = None) -> TargetSize:
    """``path``'s estimated size in ``dtype`` (default ``load_dtype(device)``) against ``device``
    (``cpu``, ``cuda``, ``cuda:N``; resolved, not ``auto``)."""
    import json

    dtype = _dtype_name(dtype or load_dtype(device))
    config = json.loads((Path(path) / CONFIG).read_text(encoding="utf-8"))
    return TargetSize(count_parameters(config), dtype, str(device), free_bytes(str(device)))


def check_target_fits(path: str | Path, device: str, dtype: str | None, *, what: str, fix: str) -> TargetSize:
    """``target_size``, or one ``ConfigError`` before any load: "<what> cannot load the target here: ...",
    with ``fix`` (the stage's alternative)."""
    size = target_size(path, device, dtype)
    if not size.fits:
        raise ConfigError(f"{what} cannot load the target here: {size.words()}", fix=fix, path=str(path))
    return size


def count_parameters(config: dict) -> int | None:
    """The language model's parameters from its ``config.json`` (module docstring); None when the
    config lacks the shape keys."""
    text = config.get("text_config") or config
    try:
        hidden, layers, vocab = int(text["hidden_size"]), int(text["num_hidden_layers"]), int(text["vocab_size"])
        blocks = sum(_attention(text, hidden) + _mlp(text, hidden, i) + 2 * hidden for i in range(layers))
    except (KeyError, TypeError, ValueError):
        return None
    tied = text.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
    return vocab * hidden * (1 if tied else 2) + blocks + hidden  # embedding, lm_head, layers, final norm


def _attention(c: dict, hidden: int) -> int:
    heads = int(c["num_attention_heads"])
    if c.get("kv_lora_rank"):  # MLA (DeepSeek-V2/V3, Kimi-K2): low-rank q and kv projections
        nope, rope, v, kv_rank = (
            int(c[k]) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")
        )
        q_rank = int(c.get("q_lora_rank") or 0)
        q = hidden * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        kv = hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
        return q + kv + heads * v * hidden
    head_dim = int(c.get("head_dim") or hidden // heads)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim  # q and o, k and v


def _mlp(c: dict, hidden: int, layer: int) -> int:
    experts = next((int(c[k]) for k in EXPERT_KEYS if c.get(k)), 0)
    if not experts or not _sparse(c, layer):
        return 3 * hidden * int(c["intermediate_size"])  # gate, up, down
    size = int(c.get("moe_intermediate_size") or c["intermediate_size"])  # Mixtral's experts are intermediate_size
    shared = int(c.get("n_shared_experts") or 0) * size + int(c.get("shared_expert_intermediate_size") or 0)
    return 3 * hidden * (experts * size + shared) + hidden * experts  # experts, shared experts, router


def _sparse(c: dict, layer: int) -> bool:
    """Whether decoder layer ``layer`` is a MoE layer: DeepSeek's first ``first_k_dense_replace`` are
    dense, Qwen-MoE's ``mlp_only_layers`` and the layers off its ``decoder_sparse_step``."""
    if layer < int(c.get("first_k_dense_replace") or 0) or layer in (c.get("mlp_only_layers") or []):
        return False
    return layer % int(c.get("moe_layer_freq") or 1) == 0 and (layer + 1) % int(c.get("decoder_sparse_step") or 1) == 0


def free_bytes(device: str) -> int | None:
    """What ``device`` has free now (module docstring); None when it cannot be read."""
    if device.startswith("cuda"):
        import torch

        count = torch.cuda.device_count()
        ids = range(count) if count > 1 else [torch.device(device).index or 0]
        return sum(torch.cuda.mem_get_info(i)[0] for i in ids)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        return None
    return None


def _dtype_name(dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise ValueError(f"no byte size known for dtype {dtype!r}")
    return name


def _gb(n: int | None) -> str:
    return "an unknown amount" if n is None else f"{n / 1e9:,.1f} GB"


def _count(n: int | None) -> str:
    if n is None:
        return "unknown number of"
    return f"{n / 1e9:,.1f} B" if n >= 1e9 else f"{n / 1e6:,.1f} M"
