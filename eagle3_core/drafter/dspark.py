"""The DSpark drafter, in one file: what vLLM's ``Qwen3DSparkModel`` serves (``qwen3_dspark.py``).

DSpark (Cheng et al., "DSpark: Confidence-Scheduled Speculative Decoding with Semi-Autoregressive
Generation", arXiv 2607.05147) is DFlash's parallel block backbone (``drafter/dflash.py``, the same
layers and checkpoint names) plus a sequential Markov head: a low-rank bigram bias, added to each
slot's logits, from the token drafted just before it. Its block is N slots, the anchor and N-1 noise
tokens, and every slot predicts (the anchor predicts the first draft): k = N, not N - 1.

    r_i      = the backbone's state of slot i (i = 0..N-1), block [x_a, n, ..., n] at a .. a+N-1
    u_i      = lm_head(norm(r_i))                                       # (V_d,) base logits
    b(x)     = markov_w2 · markov_w1[x]                                 # (V_d,) rank-r bias, x a target id
    logits_i = u_i + b(y_{i-1}),  y_{-1} = x_a                          # slot i predicts x_{a+i+1}
    y_i      = d2t-mapped argmax logits_i                               # left to right (the sequential stage)

Training feeds the true tokens as y (teacher forcing): y_{i-1} = x_{a+i}. vLLM 0.32 computes the
same (``v1/worker/gpu/spec_decode/dspark/speculator.py``, ``_sample_sequential``: ``prev`` starts
at the anchor's input id; ``qwen3_dspark.py``: ``compute_draft_logits`` + ``markov_bias``).

The export: ``architectures: ["Qwen3DSparkModel"]``, ``model_type: "qwen3"``, ``block_size`` (N),
``dspark_target_layer_ids`` (aux id - 1: vLLM adds 1), ``dspark_noise_token_id``, ``markov_rank``,
``markov_head_type: "vanilla"``, ``sample_from_anchor: true``, ``dspark_bonus_anchor: false``,
``eagle3_num_speculative_tokens`` (N: the k it was trained for; vLLM itself defaults k to ``block_size``);
weights DFlash's plus ``markov_head.markov_w1.weight`` (V x r) and ``markov_head.markov_w2.weight``
(V_d x r). No confidence head: vLLM drops it when the checkpoint ships none, and uses it only for
adaptive verification. vLLM 0.32 runs DSpark only in its V2 GPU model runner (``config/vllm.py``:
"DSpark is implemented only by the V2 GPU model runner"); on CPU it refuses to start.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from eagle3_core.drafter.dflash import HF_FIELDS, DFlashConfig, DFlashDrafter
from eagle3_core.drafter.kinds import TRAINED_K
from eagle3_core.drafter.model import _rope_theta

ARCHITECTURE = "Qwen3DSparkModel"


@dataclass
class DSparkConfig(DFlashConfig):
    markov_rank: int = 64  # r of the Markov head's bigram bias; ``mask_token_id`` is the noise token

    @classmethod
    def from_target(
        cls, target: dict, draft_vocab_size: int, aux_layer_ids: list[int], dspark: dict, shape: dict | None = None
    ) -> "DSparkConfig":
        block = {**dspark, "mask_token_id": dspark["noise_token_id"]}
        base = DFlashConfig.from_target(target, draft_vocab_size, aux_layer_ids, block, shape)
        return cls(**vars(base), markov_rank=dspark["markov_rank"])

    def to_hf(self) -> dict:
        """The export ``config.json``: the keys ``qwen3_dspark.py``, its speculator and ``config/speculative.py`` read."""
        hf = {k: v for k, v in super().to_hf().items() if k != "dflash_config"}
        return {
            **hf,
            "architectures": [ARCHITECTURE],
            "dspark_target_layer_ids": [k - 1 for k in self.aux_layer_ids],  # vLLM adds 1 back
            "dspark_noise_token_id": self.mask_token_id,
            "markov_rank": self.markov_rank,
            "markov_head_type": "vanilla",
            "sample_from_anchor": True,  # the anchor slot predicts: k = block_size
            TRAINED_K: self.block_size,  # vLLM's default k is block_size itself (config/speculative.py)
            "dspark_bonus_anchor": False,
            "use_aux_hidden_state": True,
        }

    @classmethod
    def from_hf(cls, hf: dict) -> "DSparkConfig":
        return cls(
            **{k: hf[k] for k in HF_FIELDS},
            aux_layer_ids=[k + 1 for k in hf["dspark_target_layer_ids"]],
            mask_token_id=hf["dspark_noise_token_id"],
            rope_theta=_rope_theta(hf),
            markov_rank=hf["markov_rank"],
        )


class MarkovHead(nn.Module):
    """vLLM's ``DSparkMarkovHead``: the previous token's rank-r embedding, projected to a draft-vocab bias."""

    def __init__(self, c: DSparkConfig) -> None:
        super().__init__()
        self.markov_w1 = nn.Embedding(c.vocab_size, c.markov_rank)  # indexed by target ids
        self.markov_w2 = nn.Linear(c.markov_rank, c.draft_vocab_size, bias=False)  # (V_d, r)
        nn.init.zeros_(self.markov_w2.weight)  # starts as DFlash: no bias until trained

    def forward(self, prev: torch.Tensor) -> torch.Tensor:
        """(...) target ids -> (..., V_d) bias."""
        return self.markov_w2(self.markov_w1(prev))


class DSparkDrafter(DFlashDrafter):
    ahead = 1  # the anchor's slot predicts x_{a+1}
    config_class = DSparkConfig

    def __init__(self, c: DSparkConfig) -> None:
        super().__init__(c)
        self.markov_head = MarkovHead(c)

    def chain(self, logits: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """u_i + b(y_{i-1}): (..., V_d) logits given the target token (...) before the predicted one."""
        return logits + self.markov_head(prev).to(logits.dtype)
