"""The EAGLE-3 drafter, in one file: what vLLM's ``LlamaForCausalLMEagle3`` serves.

Equations (H = hidden size, H_t = the target's, V_d = draft vocab; the drafter's H equals the target's):

    a      = [a_low; a_mid; a_high]                        # (B, T, 3H_t) target states
    a      = input_norm(a)               if norm_before_fc  # one norm over all 3H_t
    a      = [fc_norm_j(a_j)]_j          if fc_norm         # EAGLE-3.1: one norm per aux state
    g      = fc(a)                                         # (B, T, H)   step 0's hidden
    e      = input_layernorm(embed(x))                     # (B, T, H)   embed: the target's, frozen
    u      = [e; hidden_norm(g)]                           # (B, T, 2H)  layer 0 reads 2H
    r      = g + attn(u)                                   # (B, T, H)   residual stream
    r      = r + mlp(post_attention_layernorm(r))          # (B, T, H)
    r      = r + attn(input_layernorm(r))                  # (B, T, H)   layers 1..L-1: Llama blocks,
    r      = r + mlp(post_attention_layernorm(r))          #             attention reads H
    logits = lm_head(norm(r))                              # (B, T, V_d)
    g'     = norm(r) if norm_output else r                 # fed back as the next step's hidden

This is vLLM's ``llama_eagle3.py`` exactly: residual taken before ``hidden_norm``, the final
``norm`` fused with the residual add, and the *pre-norm* stream returned as the hidden for the
next draft step (the *post-norm* one with EAGLE-3.1's ``norm_output``). Draft token d maps to
target token ``d + d2t[d]``. The variants (``fc_norm``, ``norm_output``, ``norm_before_fc``,
``num_hidden_layers``) are ``DrafterConfig`` fields, written to ``config.json`` under the keys
vLLM 0.32 reads; SGLang reads the same keys except ``norm_before_fc``.

Inference API (the offline speculative-decoding loop uses this):

    drafter = Eagle3Drafter.from_export(export_dir, target_path)      # embed from the target
    g = drafter.combine(aux)                    # (B, T, 3H) target aux states -> (B, T, H)
    out = drafter(input_ids, g, positions)      # full recompute, causal over T
    out.logits                                  # (B, T, V_d) draft-vocab logits
    out.hidden                                  # (B, T, H) feed back: next step's ``g``
    drafter.to_target_ids(out.logits.argmax(-1))  # draft ids -> target ids

    cache = KVCache()                           # or incremental: each call appends its keys
    out = drafter(input_ids, g, positions, cache=cache); cache.crop(n)  # roll back rejected

Alignment: at position i the drafter reads the target's state at i and the token at i+1, and
predicts the token at i+2 (vLLM shifts ``input_ids`` left by one against the hidden states).

Training-time test (``unroll``): K steps over the same positions; step k reads token i+1+k,
its own hidden from step k-1, position i+k, and each layer attends to its own step-0 keys at
j <= i plus its own earlier steps' keys at i (the diagonal) — exactly the keys it would see at
inference. ``attention.py`` computes that in memory linear in T (no T×T score tensor is kept).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from eagle3_core.drafter.attention import segment_positions, ttt_attention

EXPORT_WEIGHTS = "model.safetensors"
EXPORT_CONFIG = "config.json"


# The export config's fields taken as they are from the drafter's config (``to_hf``).
HF_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_hidden_layers",
    "fc_norm",
    "norm_output",
    "norm_before_fc",
    "rms_norm_eps",
    "rope_theta",
    "max_position_embeddings",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
    "bos_token_id",
    "eos_token_id",
)


@dataclass
class DrafterConfig:
    hidden_size: int  # H: the target's hidden size (embeddings are shared)
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int  # the target's vocabulary
    draft_vocab_size: int
    target_hidden_size: int
    aux_layer_ids: list[int] = field(default_factory=lambda: [2, 16, 29])
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 8192
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    num_hidden_layers: int = 1  # decoder layers: the first reads [embed; hidden] (2H), the others H
    fc_norm: bool = False  # EAGLE-3.1: an RMSNorm on each aux state before fc
    norm_output: bool = False  # EAGLE-3.1: the post-norm state is fed back as the next hidden
    norm_before_fc: bool = False  # one RMSNorm over the concatenated aux states before fc

    @classmethod
    def from_target(
        cls,
        target: dict,
        draft_vocab_size: int,
        aux_layer_ids: list[int],
        shape: dict | None = None,
        variant: dict | None = None,
    ) -> "DrafterConfig":
        """The drafter for a target's ``config.json`` (dict): same widths, heads and rope, except
        what ``shape`` sets (``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
        ``intermediate_size``; None values copy the target); ``variant`` sets the architecture
        fields (``num_hidden_layers``, ``fc_norm``, ``norm_output``, ``norm_before_fc``)."""
        return cls(
            **target_widths(target, shape),
            draft_vocab_size=draft_vocab_size,
            aux_layer_ids=list(aux_layer_ids),
            bos_token_id=target.get("bos_token_id"),
            eos_token_id=target.get("eos_token_id"),
            **(variant or {}),
        )

    def trainable_parameters(self) -> int:
        """Weights the trainer updates and the export ships (the frozen embedding excluded)."""
        H, q, kv = self.hidden_size, self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        first = 2 * H * (q + 2 * kv) + q * H + 3 * H * self.intermediate_size + 3 * H  # 3 norms
        upper = H * (q + 2 * kv) + q * H + 3 * H * self.intermediate_size + 2 * H  # 2 norms
        aux_norms = 3 * self.target_hidden_size * (int(self.fc_norm) + int(self.norm_before_fc))
        return (
            3 * self.target_hidden_size * H
            + aux_norms
            + first
            + (self.num_hidden_layers - 1) * upper
            + self.draft_vocab_size * H
            + H
        )

    def to_hf(self) -> dict:
        """The export ``config.json`` that vLLM and SGLang read for ``LlamaForCausalLMEagle3``.

        The aux layer ids are written twice, once in each engine's numbering: vLLM reads the top
        level (id k = the input of decoder layer k); SGLang reads ``eagle_config`` and adds 1 to
        each id (``set_eagle3_layers_to_capture``), so it gets k - 1 there. The variant keys sit at
        the top level, where both read them; ``norm_before_fc`` also in ``eagle_config``, which vLLM
        reads first (the SGLang that reads ``fc_norm`` reads no ``norm_before_fc``).
        """
        return {
            "architectures": ["LlamaForCausalLMEagle3"],
            "model_type": "llama",
            **{name: getattr(self, name) for name in HF_FIELDS},
            "hidden_act": "silu",
            "rope_scaling": None,
            "eagle_aux_hidden_state_layer_ids": list(self.aux_layer_ids),
            "eagle_config": {
                "eagle_aux_hidden_state_layer_ids": [k - 1 for k in self.aux_layer_ids],
                "use_aux_hidden_state": True,
                "norm_before_fc": self.norm_before_fc,
            },
            "attention_bias": False,
            "mlp_bias": False,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
        }

    @classmethod
    def from_hf(cls, hf: dict) -> "DrafterConfig":
        """Read an export: vLLM's ids at the top level, else SGLang's in ``eagle_config`` (+1);
        ``norm_before_fc`` from ``eagle_config`` first, as vLLM reads it."""
        eagle = hf.get("eagle_config") or {}
        sglang = eagle.get("eagle_aux_hidden_state_layer_ids")
        ids = hf.get("eagle_aux_hidden_state_layer_ids") or ([k + 1 for k in sglang] if sglang else [2, 16, 29])
        names = {f for f in cls.__dataclass_fields__ if f != "aux_layer_ids"}
        fields = {k: v for k, v in hf.items() if k in names}
        fields["norm_before_fc"] = bool(eagle.get("norm_before_fc", hf.get("norm_before_fc", False)))
        return cls(aux_layer_ids=list(ids), **fields)


def _rope_theta(target: dict) -> float:
    """transformers 5 keeps rope_theta under ``rope_parameters``; older configs at top level."""
    params = target.get("rope_parameters") or {}
    return float(params.get("rope_theta") or target.get("rope_theta") or 10000.0)


def write_export(out_dir: str | Path, state: dict, hf_config: dict) -> None:
    """Every drafter kind's export: its weights as ``model.safetensors`` and its ``config.json``."""
    from safetensors.torch import save_file

    from eagle3_core.run.fsio import plain_file_mode

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / EXPORT_WEIGHTS), metadata={"format": "pt"})
    plain_file_mode(out / EXPORT_WEIGHTS)
    (out / EXPORT_CONFIG).write_text(json.dumps(hf_config, indent=2) + "\n")


def target_widths(target: dict, shape: dict | None = None) -> dict:
    """What every drafter kind copies from the target's ``config.json``: widths, heads, vocab, norm
    and rope; ``shape`` (``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
    ``intermediate_size``) overrides where set, None values copy the target."""
    shape = {k: v for k, v in (shape or {}).items() if v is not None}
    heads = shape.get("num_attention_heads", target["num_attention_heads"])
    return {
        "hidden_size": target["hidden_size"],
        "intermediate_size": shape.get("intermediate_size", target["intermediate_size"]),
        "num_attention_heads": heads,
        "num_key_value_heads": shape.get("num_key_value_heads", target.get("num_key_value_heads") or heads),
        "head_dim": shape.get("head_dim", target.get("head_dim") or target["hidden_size"] // heads),
        "vocab_size": target["vocab_size"],
        "target_hidden_size": target["hidden_size"],
        "rms_norm_eps": target.get("rms_norm_eps", 1e-6),
        "rope_theta": _rope_theta(target),
        "max_position_embeddings": target.get("max_position_embeddings", 8192),
    }


# ---------------------------------------------------------------------------- components


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Llama rotary embedding (rotate-half): x (B, h, T, d), positions (B, T)."""
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    angles = positions.float()[:, None, :, None] * inv_freq  # (B, 1, T, d/2)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    x1, x2 = x.float().chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.float() * cos + rotated * sin).to(x.dtype)


@dataclass
class KVCache:
    """Per decoder layer, the keys and values of the positions drafted so far, (B, h_kv, S, d) each;
    ``crop`` rolls every layer back."""

    k: list[torch.Tensor] = field(default_factory=list)
    v: list[torch.Tensor] = field(default_factory=list)

    def __len__(self) -> int:
        return self.past(0)

    def past(self, layer: int) -> int:
        return self.k[layer].shape[2] if layer < len(self.k) else 0

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if layer == len(self.k):
            self.k.append(k)
            self.v.append(v)
        else:
            self.k[layer] = torch.cat([self.k[layer], k], dim=2)
            self.v[layer] = torch.cat([self.v[layer], v], dim=2)
        return self.k[layer], self.v[layer]

    def crop(self, length: int) -> None:
        self.k = [k[:, :, :length] for k in self.k]
        self.v = [v[:, :, :length] for v in self.v]


class Attention(nn.Module):
    """Grouped-query attention whose q/k/v read ``width`` features: [embed; hidden] (2H) in layer 0, H above."""

    def __init__(self, c: DrafterConfig, width: int) -> None:
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(width, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(width, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(width, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)

    def qkv(self, u: torch.Tensor, positions: torch.Tensor):
        B, T, _ = u.shape  # u: (B, T, width)
        q = self.q_proj(u).view(B, T, -1, self.c.head_dim).transpose(1, 2)  # (B, h, T, d)
        k = self.k_proj(u).view(B, T, -1, self.c.head_dim).transpose(1, 2)  # (B, h_kv, T, d)
        v = self.v_proj(u).view(B, T, -1, self.c.head_dim).transpose(1, 2)  # (B, h_kv, T, d)
        return rope(q, positions, self.c.rope_theta), rope(k, positions, self.c.rope_theta), v

    def out(self, y: torch.Tensor) -> torch.Tensor:
        B, _, T, _ = y.shape  # y: (B, h, T, d)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, H)

    def forward(self, u: torch.Tensor, positions: torch.Tensor, cache: KVCache | None, layer: int) -> torch.Tensor:
        """Causal attention over this layer's cache (if any) plus these T positions."""
        q, k, v = self.qkv(u, positions)
        past = cache.past(layer) if cache is not None else 0
        if cache is not None:
            k, v = cache.append(layer, k, v)  # (B, h_kv, S, d)
        T, S = q.shape[2], k.shape[2]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return self.out(y)


class MLP(nn.Module):
    """The Llama MLP every drafter kind uses (``c`` names ``hidden_size`` and ``intermediate_size``)."""

    def __init__(self, c: DrafterConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """A Llama block. The first (``midlayer``) attends over [input_layernorm(e); hidden_norm(g)];
    the others (``layers.N``) are plain pre-norm blocks on the stream, attending over input_layernorm(r)."""

    def __init__(self, c: DrafterConfig, first: bool) -> None:
        super().__init__()
        self.first = first
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        if first:
            self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c, (2 if first else 1) * c.hidden_size)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def inputs(self, e: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        if not self.first:
            return self.input_layernorm(g)  # (B, T, H): upper layers never see the embedding
        return torch.cat([self.input_layernorm(e), self.hidden_norm(g)], dim=-1)  # (B, T, 2H)

    def finish(self, g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        r = g + a  # (B, T, H)
        return r + self.mlp(self.post_attention_layernorm(r))  # (B, T, H) pre-norm

    def forward(self, e, g, positions, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        return self.finish(g, self.self_attn(self.inputs(e, g), positions, cache, layer))


@dataclass
class DraftOutput:
    logits: torch.Tensor  # (B, T, V_d) draft-vocab logits
    hidden: torch.Tensor  # (B, T, H) pre-norm stream: the next step's hidden input


# ---------------------------------------------------------------------------- the drafter


class Eagle3Drafter(nn.Module):
    def __init__(self, c: DrafterConfig) -> None:
        super().__init__()
        self.config = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)  # the target's, frozen
        self.embed_tokens.weight.requires_grad_(False)
        self.input_norm = RMSNorm(3 * c.target_hidden_size, c.rms_norm_eps) if c.norm_before_fc else None
        self.fc_norm = (
            nn.ModuleList(RMSNorm(c.target_hidden_size, c.rms_norm_eps) for _ in range(3)) if c.fc_norm else None
        )
        self.fc = nn.Linear(3 * c.target_hidden_size, c.hidden_size, bias=False)
        self.midlayer = DecoderLayer(c, first=True)
        # named as the engines load them: layers.1 .. layers.L-1 (vLLM maps midlayer to layers.0)
        self.layers = nn.ModuleDict({str(n): DecoderLayer(c, first=False) for n in range(1, c.num_hidden_layers)})
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(c.draft_vocab_size, dtype=torch.long))
        # identity until ``set_vocab``: draft id d is target id d (d2t = 0)
        self.register_buffer("t2d", torch.arange(c.vocab_size) < c.draft_vocab_size)
        # the unroll's attention; None = ``attention.ttt_attention``, the blocked form. Training on a GPU
        # may set compiled flex (``train.ttt_attention``): the same function, 3-9x faster there
        self.attend = None

    def decoder_layers(self) -> list[DecoderLayer]:
        return [self.midlayer, *self.layers.values()]

    def combine(self, aux: torch.Tensor) -> torch.Tensor:
        """(B, T, 3, H_t) or (B, T, 3H_t) target aux states -> (B, T, H) step-0 hidden."""
        a = aux.flatten(-2) if aux.dim() == 4 else aux  # (B, T, 3H_t)
        if self.input_norm is not None:
            a = self.input_norm(a)  # one norm over all three
        if self.fc_norm is not None:
            a = torch.cat([norm(x) for norm, x in zip(self.fc_norm, a.chunk(3, dim=-1))], dim=-1)  # one each
        return self.fc(a)  # (B, T, H)

    def feedback(self, r: torch.Tensor) -> torch.Tensor:
        """(B, T, H) stream -> the next draft step's hidden: post-norm with ``norm_output``, else as is."""
        return self.norm(r) if self.config.norm_output else r

    def forward(self, input_ids, hidden, positions, cache: KVCache | None = None) -> DraftOutput:
        e = self.embed_tokens(input_ids).to(hidden.dtype)  # (B, T, H)
        r = hidden  # (B, T, H): layer 0's residual is the hidden it reads
        for n, layer in enumerate(self.decoder_layers()):
            r = layer(e, r, positions, cache, n)  # (B, T, H)
        return DraftOutput(self.logits(r), self.feedback(r))

    def unroll(
        self,
        input_ids: torch.Tensor,
        aux: torch.Tensor,
        steps: int,
        segments: torch.Tensor | None = None,
        recompute: bool = False,
    ) -> list[torch.Tensor]:
        """Training-time test: K steps' outputs, each (B, T, H); step k's ``logits`` predict i+2+k.

        The outputs are the pre-norm streams (what ``logits`` turns into (B, T, V_d) draft logits):
        the loss makes the logits chunk by chunk, so a step's full logits are never held.
        input_ids (B, T) are the tokens at i+1 (already shifted); step k reads ids shifted by k
        more (zero-padded at the end: those positions are masked out of the loss). ``segments``
        (B, T) numbers the samples packed in a row (padding is a segment of its own): attention
        never crosses a boundary and positions restart at each sample. None = one sample a row.
        ``recompute``: keep only each step's inputs and outputs for backward and recompute the
        rest (one more forward; Llama-8B shape: 2.10 MB -> 0.24 MB kept per token).
        """
        if segments is None:
            segments = torch.zeros_like(input_ids)
        positions = segment_positions(segments)  # (B, T)
        g = self.combine(aux)  # (B, T, H)
        keys: list[list[torch.Tensor]] = [[] for _ in self.decoder_layers()]  # per layer: k, v of each step
        outputs = []
        for k in range(steps):
            args = (g, F.pad(input_ids[:, k:], (0, k)), positions + k, segments, *sum(keys, []))  # token i+1+k
            if recompute and torch.is_grad_enabled():
                r, *new = checkpoint(self._ttt_step, *args, use_reentrant=False)
            else:
                r, *new = self._ttt_step(*args)
            for n, layer_keys in enumerate(keys):
                layer_keys += new[2 * n : 2 * n + 2]  # this step's (k, v) of layer n
            outputs.append(r)  # (B, T, H) pre-norm: the loss's logits
            g = self.feedback(r)  # (B, T, H) the next step's hidden
        return outputs

    def _ttt_step(self, g, ids, positions, segments, *past):
        """One unroll step over the same positions: its stream, then each layer's keys and values.

        ``past`` holds, layer by layer, the (k, v) of every earlier step (B, h_kv, T, d) each."""
        layers = self.decoder_layers()
        per_layer = len(past) // len(layers)
        e = self.embed_tokens(ids).to(g.dtype)  # (B, T, H)
        r, new = g, []
        for n, layer in enumerate(layers):
            mine = past[n * per_layer : (n + 1) * per_layer]  # k0, v0, k1, v1, ...
            q, k, v = layer.self_attn.qkv(layer.inputs(e, r), positions)
            a = (self.attend or ttt_attention)(q, [*mine[0::2], k], [*mine[1::2], v], segments)  # (B, h, T, d)
            r = layer.finish(r, layer.self_attn.out(a))  # (B, T, H)
            new += [k, v]
        return r, *new

    def logits(self, g: torch.Tensor) -> torch.Tensor:
        """(B, T, H) pre-norm stream -> (B, T, V_d) draft-vocab logits."""
        return self.lm_head(self.norm(g))

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def set_vocab(self, d2t: torch.Tensor, t2d: torch.Tensor) -> None:
        self.d2t.copy_(d2t.long())
        self.t2d.copy_(t2d.bool())

    # ------------------------------------------------------------------------ export / load

    def full_vocab(self) -> bool:
        return self.config.draft_vocab_size == self.config.vocab_size

    def export_state(self, with_embedding: bool = False) -> dict[str, torch.Tensor]:
        """The serving checkpoint, bf16; ``d2t`` int64 and ``t2d`` bool for a reduced draft vocab.

        With the full vocabulary as draft vocab, the lm_head rows are put in target order and no
        ``d2t``/``t2d`` is shipped (vLLM then maps nothing). The embedding (the target's) ships
        only on request: vLLM shares the target's at pipeline-parallel size 1.
        """
        skip = ("d2t", "t2d") if with_embedding else ("embed_tokens.weight", "d2t", "t2d")
        state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in self.state_dict().items() if k not in skip}
        state.update(sglang_aliases(state))
        if self.full_vocab():
            order = torch.empty_like(self.d2t)
            order[self.to_target_ids(torch.arange(len(self.d2t)))] = torch.arange(len(self.d2t))
            state["lm_head.weight"] = state["lm_head.weight"][order].contiguous()  # row t = target id t
            return state
        state["d2t"], state["t2d"] = self.d2t.long().contiguous(), self.t2d.bool().contiguous()
        return state

    def save_export(self, out_dir: str | Path, with_embedding: bool = False) -> None:
        write_export(out_dir, self.export_state(with_embedding), self.config.to_hf())

    @classmethod
    def from_export(
        cls, export_dir: str | Path, target_path: str | Path | None = None, embed_tokens: torch.Tensor | None = None
    ) -> "Eagle3Drafter":
        """Load an export; the embedding comes from ``embed_tokens`` or the target directory."""
        from safetensors.torch import load_file

        export_dir = Path(export_dir)
        config = DrafterConfig.from_hf(json.loads((export_dir / EXPORT_CONFIG).read_text()))
        model = cls(config)
        state = without_aliases(load_file(str(export_dir / EXPORT_WEIGHTS)))
        if embed_tokens is None and target_path is not None and "embed_tokens.weight" not in state:
            embed_tokens = load_target_tensor(target_path, "embed_tokens.weight")
        if embed_tokens is not None:
            state["embed_tokens.weight"] = embed_tokens
        missing, unexpected = model.load_state_dict(
            {k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=False
        )
        optional = (
            ("embed_tokens.weight", "d2t", "t2d")
            if config.draft_vocab_size == config.vocab_size
            else ("embed_tokens.weight",)
        )
        missing = [k for k in missing if k not in optional]
        if missing or unexpected:
            from eagle3_core.errors import InputError

            raise InputError(
                f"not an EAGLE-3 export of this shape: missing {missing[:4]}, unexpected {unexpected[:4]}",
                path=str(export_dir / EXPORT_WEIGHTS),
                fix="pass a drafter/export/ folder written by `eagle3 train`",
            )
        return model.eval()


def sglang_aliases(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``layers.N.hidden_norm.weight`` for each layer above the first: the same tensor as its
    ``input_layernorm``. vLLM normalises an upper layer's input with ``input_layernorm``, SGLang
    with ``hidden_norm`` (its llama_eagle3 fuses the residual add into it); shipping both names
    makes the two engines compute the same layer."""
    suffix = ".input_layernorm.weight"
    return {
        k.replace(suffix, ".hidden_norm.weight"): v.clone()
        for k, v in state.items()
        if k.startswith("layers.") and k.endswith(suffix)
    }


def without_aliases(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An export's weights less ``sglang_aliases`` (copies this model does not hold twice)."""
    return {k: v for k, v in state.items() if not (k.startswith("layers.") and k.endswith(".hidden_norm.weight"))}


def load_target_tensor(target_path: str | Path, suffix: str) -> torch.Tensor:
    """One tensor (e.g. ``embed_tokens.weight``, ``lm_head.weight``) from a target's safetensors."""
    from safetensors import safe_open

    for file in sorted(Path(target_path).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as fh:
            for key in fh.keys():
                if key == suffix or key.endswith("." + suffix):
                    return fh.get_tensor(key)
    from eagle3_core.errors import InputError

    raise InputError(
        f"the target has no tensor named {suffix!r} in its safetensors files",
        path=f"{target_path}/*.safetensors",
        fix="point target.path at a Hugging Face directory whose weights are *.safetensors",
    )
