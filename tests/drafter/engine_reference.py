"""The drafter's forward as the serving engines write it, kept only as the reference for the tests.

A plain restatement of vLLM 0.32's ``llama_eagle3.py`` (``combine_hidden_states``, then
``LlamaModel.forward`` with its fused ``RMSNorm(x, residual)``: residual = x + residual, then the
norm of it) and of SGLang's (the version that reads ``fc_norm``), over the exported tensor names.
The two differ only in which weight normalises an upper layer's input: vLLM's
``input_layernorm``, SGLang's ``hidden_norm``. Full causal attention, no cache, one sample a row.
"""

import math

import torch
import torch.nn.functional as F

from eagle3_core.drafter.model import rope


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def add_rms(x, residual, weight, eps):
    """vLLM's and SGLang's fused ``norm(x, residual)``: (norm(x + residual), x + residual)."""
    residual = x + residual
    return rms(residual, weight, eps), residual


def combine_hidden_states(W: dict, hf: dict, aux: torch.Tensor) -> torch.Tensor:
    """aux (B, T, 3H_t) -> (B, T, H): input_norm if norm_before_fc, then fc_norm per chunk, then fc."""
    eps = hf["rms_norm_eps"]
    if hf["eagle_config"].get("norm_before_fc", hf.get("norm_before_fc")):
        aux = rms(aux, W["input_norm.weight"], eps)
    if hf.get("fc_norm"):
        aux = torch.cat([rms(x, W[f"fc_norm.{j}.weight"], eps) for j, x in enumerate(aux.chunk(3, -1))], -1)
    return aux @ W["fc.weight"].T


def attention(W: dict, p: str, hf: dict, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    B, T, _ = x.shape
    d, h, kv = hf["head_dim"], hf["num_attention_heads"], hf["num_key_value_heads"]
    q = (x @ W[p + "self_attn.q_proj.weight"].T).view(B, T, h, d).transpose(1, 2)
    k = (x @ W[p + "self_attn.k_proj.weight"].T).view(B, T, kv, d).transpose(1, 2)
    v = (x @ W[p + "self_attn.v_proj.weight"].T).view(B, T, kv, d).transpose(1, 2)
    q, k = rope(q, positions, hf["rope_theta"]), rope(k, positions, hf["rope_theta"])
    k, v = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = s.softmax(-1) @ v  # (B, h, T, d)
    return y.transpose(1, 2).reshape(B, T, -1) @ W[p + "self_attn.o_proj.weight"].T


def mlp(W: dict, p: str, x: torch.Tensor) -> torch.Tensor:
    gate, up = x @ W[p + "mlp.gate_proj.weight"].T, x @ W[p + "mlp.up_proj.weight"].T
    return (F.silu(gate) * up) @ W[p + "mlp.down_proj.weight"].T


def engine_forward(W: dict, hf: dict, ids, hidden, positions, engine: str = "vllm"):
    """(logits (B, T, V_d), the hidden fed back to the next draft step (B, T, H))."""
    eps = hf["rms_norm_eps"]
    embeds = W["embed_tokens.weight"][ids]
    x, residual = hidden, None
    for n in range(hf["num_hidden_layers"]):
        p = "midlayer." if n == 0 else f"layers.{n}."
        if n == 0:
            residual = x
            x = torch.cat(
                [rms(embeds, W[p + "input_layernorm.weight"], eps), rms(x, W[p + "hidden_norm.weight"], eps)], -1
            )
        else:
            norm = "input_layernorm" if engine == "vllm" else "hidden_norm"
            x, residual = add_rms(x, residual, W[p + norm + ".weight"], eps)
        x = attention(W, p, hf, x, positions)
        x, residual = add_rms(x, residual, W[p + "post_attention_layernorm.weight"], eps)
        x = mlp(W, p, x)
    normed, prenorm = add_rms(x, residual, W["norm.weight"], eps)
    return normed @ W["lm_head.weight"].T, normed if hf.get("norm_output") else prenorm
