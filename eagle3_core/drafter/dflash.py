"""The DFlash block drafter, in one file: what vLLM's ``DFlashDraftModel`` serves (``qwen3_dflash.py``).

DFlash (Chen et al., "DFlash: Block Diffusion for Flash Speculative Decoding", arXiv 2602.06036)
drafts a block of B tokens in one forward pass. The block is the anchor x_a (the token the target
has just written) followed by B-1 copies of a mask token; every block slot attends, bidirectionally,
to the other slots and to the target's fused features at the positions before the anchor.

Equations (H = hidden size, H_t = the target's, V_d = draft vocab; the drafter's H equals H_t, since
the embedding is the target's):

    c      = hidden_norm(fc([a_1; ...; a_n]))                # (B, T, H)  context features, t < anchor
    r      = embed([x_a, m, ..., m])                          # (B, N·Bk, H) N blocks of Bk slots
    per layer:
      h    = input_layernorm(r)
      q    = rope(q_norm(W_q h))                              # block slots only
      k    = rope([k_norm(W_k c) ; k_norm(W_k h)])            # context first, then the block
      v    = [W_v c ; W_v h]
      r    = r + W_o softmax(q kᵀ / √d + mask) v              # mask: context t < anchor, own block
      r    = r + mlp(post_attention_layernorm(r))             # SwiGLU
    logits = lm_head(norm(r))                                 # (B, N·Bk, V_d): slot j predicts x_{a+j}

The context keys use each layer's own ``k_proj``/``v_proj`` on the same ``c`` (vLLM's
``precompute_and_store_context_kv``), and never pass through ``input_layernorm``. Positions are
absolute: context t at t, block slot j at a + j. Draft token d is target token ``d + d2t[d]``.

vLLM 0.32 loads the export as ``architectures: ["DFlashDraftModel"]``, ``model_type: "qwen3"``
with ``dflash_config.{target_layer_ids, mask_token_id}`` (target layer ids count layer *outputs*
from 0: vLLM adds 1, so eagle3's aux id k, the input of decoder layer k, is written k - 1) and
``--speculative-config '{"method": "dflash", "num_speculative_tokens": Bk - 1}'`` (its query is the
anchor plus k masks). vLLM reads no k from a DFlash config: the export states it as
``eagle3_num_speculative_tokens`` (``kinds.TRAINED_K``), which evaluate and the model card read.
It shares the target's embedding when the export ships none; the mask token's row is then the
target's own row for ``mask_token_id``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_core.drafter.kinds import TRAINED_K
from eagle3_core.drafter.model import (
    EXPORT_CONFIG,
    EXPORT_WEIGHTS,
    MLP,
    RMSNorm,
    _rope_theta,
    load_target_tensor,
    rope,
    target_widths,
    write_export,
)

ARCHITECTURE = "DFlashDraftModel"


@dataclass
class DFlashConfig:
    hidden_size: int  # H: the target's (the embedding is shared)
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int  # the target's vocabulary
    draft_vocab_size: int
    target_hidden_size: int
    aux_layer_ids: list[int]  # eagle3's (vLLM's aux) numbering: id k = the input of decoder layer k
    block_size: int  # Bk: anchor + Bk - 1 masks; vLLM's num_speculative_tokens = Bk - 1
    mask_token_id: int
    num_hidden_layers: int = 1
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 8192

    @classmethod
    def from_target(
        cls, target: dict, draft_vocab_size: int, aux_layer_ids: list[int], dflash: dict, shape: dict | None = None
    ) -> "DFlashConfig":
        """The drafter for a target's ``config.json``: its widths unless ``shape`` sets them."""
        return cls(
            **target_widths(target, shape),
            draft_vocab_size=draft_vocab_size,
            aux_layer_ids=list(aux_layer_ids),
            block_size=dflash["block_size"],
            mask_token_id=dflash["mask_token_id"],
            num_hidden_layers=dflash["num_hidden_layers"],
        )

    def to_hf(self) -> dict:
        """The export ``config.json``: the keys ``qwen3_dflash.py`` and ``config/speculative.py`` read."""
        return {
            "architectures": [ARCHITECTURE],
            "model_type": "qwen3",
            **{k: getattr(self, k) for k in HF_FIELDS},
            "hidden_act": "silu",
            "rope_parameters": {"rope_theta": self.rope_theta, "rope_type": "default"},
            "attention_bias": False,
            "tie_word_embeddings": False,
            "dflash_config": {
                "target_layer_ids": [k - 1 for k in self.aux_layer_ids],  # vLLM adds 1 back
                "mask_token_id": self.mask_token_id,
            },
            TRAINED_K: self.block_size - 1,  # the anchor's slot predicts nothing (drafter/kinds.py)
            "torch_dtype": "bfloat16",
        }

    @classmethod
    def from_hf(cls, hf: dict) -> "DFlashConfig":
        dflash = hf["dflash_config"]
        fields = {k: hf[k] for k in HF_FIELDS}
        ids = [k + 1 for k in dflash["target_layer_ids"]]
        theta = _rope_theta(hf)
        return cls(**fields, aux_layer_ids=ids, mask_token_id=dflash["mask_token_id"], rope_theta=theta)


# The export config's fields taken as they are (vLLM reads block_size only as a record of training).
HF_FIELDS = tuple(
    f for f in DFlashConfig.__dataclass_fields__ if f not in ("aux_layer_ids", "mask_token_id", "rope_theta")
)


# ---------------------------------------------------------------------------- components


class BlockAttention(nn.Module):
    """Qwen3 attention (per-head q/k RMSNorm) whose keys are the context's and the block's."""

    def __init__(self, c: DFlashConfig) -> None:
        super().__init__()
        self.c, d = c, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * d, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * d, c.hidden_size, bias=False)
        self.q_norm = RMSNorm(d, c.rms_norm_eps)
        self.k_norm = RMSNorm(d, c.rms_norm_eps)

    def heads(self, x: torch.Tensor, proj: nn.Linear) -> torch.Tensor:
        B, T, _ = x.shape
        return proj(x).view(B, T, -1, self.c.head_dim).transpose(1, 2)  # (B, h, T, d)

    def keys(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(k, v), each (B, h_kv, T, d), for states x (B, T, H) at ``positions`` (B, T)."""
        k = rope(self.k_norm(self.heads(x, self.k_proj)), positions, self.c.rope_theta)
        return k, self.heads(x, self.v_proj)

    def forward(self, h, positions, ctx_kv, mask) -> torch.Tensor:
        """h (B, Q, H) block slots; ctx_kv this layer's context (k, v); mask (B, 1, Q, T + Q) bool."""
        q = rope(self.q_norm(self.heads(h, self.q_proj)), positions, self.c.rope_theta)  # (B, h, Q, d)
        k_own, v_own = self.keys(h, positions)
        k, v = torch.cat([ctx_kv[0], k_own], 2), torch.cat([ctx_kv[1], v_own], 2)  # (B, h_kv, T + Q, d)
        group = self.c.num_attention_heads // self.c.num_key_value_heads
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, Q, d)
        return self.o_proj(y.transpose(1, 2).reshape(h.shape[0], h.shape[1], -1))


class BlockLayer(nn.Module):
    def __init__(self, c: DFlashConfig) -> None:
        super().__init__()
        self.self_attn = BlockAttention(c)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, r, positions, ctx_kv, mask) -> torch.Tensor:
        r = r + self.self_attn(self.input_layernorm(r), positions, ctx_kv, mask)  # (B, Q, H)
        return r + self.mlp(self.post_attention_layernorm(r))


class DFlashDrafter(nn.Module):
    """The block drafter. Draft step j (1..k) is read at block slot ``j - ahead`` and predicts x_{a+j}:
    DFlash's anchor slot predicts nothing (``ahead = 0``, k = Bk - 1); a kind whose anchor slot
    predicts the next token (DSpark, ``drafter/dspark.py``) sets ``ahead = 1`` (k = Bk)."""

    ahead = 0
    config_class = DFlashConfig

    def __init__(self, c: DFlashConfig) -> None:
        super().__init__()
        self.config = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)  # the target's, frozen
        self.fc = nn.Linear(len(c.aux_layer_ids) * c.target_hidden_size, c.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.layers = nn.ModuleList([BlockLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(c.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(c.vocab_size, dtype=torch.bool))

    def context(self, aux: torch.Tensor) -> torch.Tensor:
        """(B, T, n, H_t) target states -> (B, T, H) context features c."""
        return self.hidden_norm(self.fc(aux.flatten(2)))

    def forward(self, block_ids, block_positions, context, context_positions, mask) -> torch.Tensor:
        """block_ids, block_positions (B, Q); context (B, T, H) at context_positions (B, T);
        mask (B, 1, Q, T + Q) bool. Returns the block's final states (B, Q, H) before ``norm``."""
        r = self.embed_tokens(block_ids).to(context.dtype)  # (B, Q, H)
        for layer in self.layers:
            ctx_kv = layer.self_attn.keys(context, context_positions)  # this layer's projections of c
            r = layer(r, block_positions, ctx_kv, mask)
        return r

    def logits(self, r: torch.Tensor) -> torch.Tensor:
        """(B, Q, H) -> (B, Q, V_d) draft-vocab logits."""
        return self.lm_head(self.norm(r))

    def chain(self, logits: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """Step logits (..., V_d) given the target token before each predicted one (...): DFlash's slots
        never read it (a sequential kind adds its bias here)."""
        return logits

    def slots(self, k: int) -> int:
        """Block slots that draft k tokens."""
        return k + 1 - self.ahead

    @torch.no_grad()
    def propose(self, aux: torch.Tensor, anchor: int, k: int) -> list[int]:
        """k draft target ids after ``anchor`` (the last token, at position T) from the target's
        aux states (1, T, n·H_t) at positions 0..T-1: one block, as vLLM's proposer runs it, its
        steps read left to right (each ``chain``ed on the token drafted before it)."""
        T, dev = aux.shape[1], aux.device
        context = self.context(aux.view(1, T, len(self.config.aux_layer_ids), -1))  # (1, T, H)
        n = self.slots(k)
        ids = torch.full((1, n), self.config.mask_token_id, dtype=torch.long, device=dev)
        ids[0, 0] = anchor
        positions = torch.arange(T, T + n, device=dev)[None]
        mask = torch.ones(1, 1, n, T + n, dtype=torch.bool, device=dev)  # all context, the whole block
        r = self(ids, positions, context, torch.arange(T, device=dev)[None], mask)
        base = self.logits(r[0, 1 - self.ahead :])  # (k, V_d) step j at row j-1
        drafts, prev = [], torch.tensor(anchor, device=dev)
        for j in range(k):
            prev = self.to_target_ids(self.chain(base[j], prev).argmax(-1))
            drafts.append(int(prev))
        return drafts

    @torch.no_grad()
    def block_predictions(self, seq: torch.Tensor, aux: torch.Tensor, k: int, group: int = 64) -> torch.Tensor:
        """(k, T) target ids: column i holds the block anchored at i+1 (it sees states 0..i), step j
        at row j-1, so row j-1 predicts seq[i+1+j] as EAGLE-3's step j-1 at i does; the last column is
        -1. Steps are ``chain``ed on the true tokens: a draft after a wrong one is never accepted, so
        the accepted runs equal those of drafting on its own tokens. ``group`` anchors at a time bound
        the scores to group·slots x (T + group·slots)."""
        T, n = seq.shape[1], self.slots(k)
        context = self.context(aux)  # (1, T, H)
        positions = torch.arange(T, device=seq.device)[None]
        truth = torch.nn.functional.pad(seq, (0, k + 1), value=0)[0]  # seq[t], 0 past the end
        cols = []
        for s in range(1, T, group):
            anchors = torch.arange(s, min(T, s + group), device=seq.device)[None]  # (1, g)
            ids, pos = block_inputs(seq, anchors, anchors, replace(self.config, block_size=n))
            keep = torch.ones_like(anchors, dtype=torch.bool)
            mask = block_mask(anchors, keep, torch.ones_like(seq), T, n)
            r = self(ids, pos, context, positions, mask).view(1, -1, n, self.config.hidden_size)
            prev = truth[anchors[0, :, None] + torch.arange(k, device=seq.device)]  # (g, k) x_{a+j-1}
            logits = self.chain(self.logits(r[0, :, 1 - self.ahead :]), prev)  # (g, k, V_d)
            cols.append(self.to_target_ids(logits.argmax(-1)))  # (g, k)
        hits = torch.cat(cols).T if cols else torch.empty(k, 0, dtype=torch.long, device=seq.device)  # (k, T-1)
        return torch.cat([hits, torch.full((k, 1), -1, dtype=torch.long, device=seq.device)], 1)  # on seq's device

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def set_vocab(self, d2t: torch.Tensor, t2d: torch.Tensor) -> None:
        self.d2t.copy_(d2t.long())
        self.t2d.copy_(t2d.bool())

    # ------------------------------------------------------------------------ export / load

    def export_state(self) -> dict[str, torch.Tensor]:
        """bf16 weights under vLLM's checkpoint names, ``d2t`` int64 (vLLM maps draft ids with it)
        and ``t2d`` bool (vLLM skips it; the offline loop reads it). No embedding: vLLM shares the target's.

        A draft vocab as large as the target's ships no mapping: vLLM's DFlash and DSpark models then
        have no ``draft_id_to_target_id`` parameter, and a ``d2t`` in the checkpoint fails their load."""
        skip = ("embed_tokens.weight", "d2t", "t2d")
        state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in self.state_dict().items() if k not in skip}
        if self.config.draft_vocab_size < self.config.vocab_size:
            state["d2t"], state["t2d"] = self.d2t.long().contiguous(), self.t2d.bool().contiguous()
        return state

    def save_export(self, out_dir: str | Path, with_embedding: bool = False) -> None:
        """``with_embedding``: ship the target's embedding (vLLM then loads it instead of sharing)."""

        state = self.export_state()
        if with_embedding:
            state["embed_tokens.weight"] = self.embed_tokens.weight.detach().to(torch.bfloat16).contiguous()
        write_export(out_dir, state, self.config.to_hf())

    @classmethod
    def from_export(
        cls, export_dir: str | Path, target_path: str | Path | None = None, embed_tokens: torch.Tensor | None = None
    ) -> "DFlashDrafter":
        """An export with the target's embedding (``embed_tokens``, else read from ``target_path``)."""
        from safetensors.torch import load_file

        export_dir = Path(export_dir)
        model = cls(cls.config_class.from_hf(json.loads((export_dir / EXPORT_CONFIG).read_text())))
        state = load_file(str(export_dir / EXPORT_WEIGHTS))
        if "embed_tokens.weight" not in state:
            found = embed_tokens if embed_tokens is not None else load_target_tensor(target_path, "embed_tokens.weight")
            state["embed_tokens.weight"] = found
        state.setdefault("d2t", torch.zeros_like(model.d2t))  # a full draft vocab: draft id = target id
        state.setdefault("t2d", torch.ones_like(model.t2d))
        model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
        return model.eval()


# ---------------------------------------------------------------------------- the blocks


def block_inputs(input_ids: torch.Tensor, anchors: torch.Tensor, starts: torch.Tensor, c: DFlashConfig):
    """(ids, positions), each (B, N·Bk): per anchor a (row index) whose rope position is s,
    [x_a, m, ..., m] at positions s, s+1, ..., s+Bk-1."""
    B, N = anchors.shape
    offsets = torch.arange(c.block_size, device=anchors.device)
    positions = (starts[..., None] + offsets).reshape(B, N * c.block_size)  # (B, N·Bk)
    ids = torch.full((B, N, c.block_size), c.mask_token_id, dtype=input_ids.dtype, device=input_ids.device)
    ids[..., 0] = input_ids.gather(1, anchors)  # the anchor token itself
    return ids.reshape(B, N * c.block_size), positions


def block_mask(anchors: torch.Tensor, keep: torch.Tensor, segments: torch.Tensor, T: int, block_size: int):
    """(B, 1, N·Bk, T + N·Bk) bool: slot of block n sees context t < a_n of its own sample, and its block.

    ``keep`` (B, N) marks real anchors; a padded anchor's slots see only themselves (no NaN rows)."""
    B, N = anchors.shape
    Q = N * block_size
    a = anchors.repeat_interleave(block_size, 1)  # (B, Q) the anchor of each slot
    t = torch.arange(T, device=anchors.device)
    own_sample = segments.gather(1, a)[..., None] == segments[:, None, :]  # (B, Q, T)
    context = (t < a[..., None]) & own_sample & keep.repeat_interleave(block_size, 1)[..., None]
    blocks = torch.arange(Q, device=anchors.device) // block_size
    own_block = (blocks[:, None] == blocks[None, :]).expand(B, Q, Q)
    return torch.cat([context, own_block], -1)[:, None]  # (B, 1, Q, T + Q)
