"""DSpark's training hooks: the drafter of ``drafter/dspark.py`` and the paper's loss, on DFlash's blocks.

Loss (DSpark, arXiv 2607.05147, section 3.3; NeMo AutoModel's and SpecForge's DSpark trainers weigh
it the same way), with DFlash's anchors, blocks and counts (``kind_dflash.forward``):

    block    [x_a, n, ..., n] at positions a .. a+N-1; it sees the target's features at t < a
    q_j      = softmax(u_{j-1} + b(x_{a+j-1}))        step j = slot j-1, Markov bias of the true token before it
    loss_j   = mean over counted blocks of  ce_w · -log q_j(top_j) + tv_w · ½ Σ_v |q_j(v) - p_target(v)|
    loss     = Σ_{j=1}^{N} exp(-(j-1)/γ) loss_j

top_j is the target's own greedy token (x_{a+j} where the data is its greedy answer, the token greedy
verification accepts); the total-variation term is 1 - the chance that sampled drafting keeps the
token, the paper's acceptance proxy. The paper's third term trains a confidence head for vLLM's
adaptive verification (GPU only); it is not trained here and the export ships no confidence head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from eagle3_core.drafter.dspark import DSparkDrafter
from eagle3_core.stages.train import kind_dflash
from eagle3_core.stages.train.kind_hooks import KindTraining


def build(inputs, cfg, init_from: str | None = None) -> DSparkDrafter:
    return kind_dflash.build(inputs, cfg, init_from, model_class=DSparkDrafter)


def step_loss(logits: torch.Tensor, p: torch.Tensor, top: torch.Tensor, section) -> torch.Tensor:
    """(B, N) per block at one step: ce_w x cross-entropy on the target's top + tv_w x total variation."""
    log_q = F.log_softmax(logits, -1)  # (B, N, V_d)
    ce = -log_q.gather(-1, top[..., None])[..., 0]
    tv = 0.5 * (log_q.exp() - p).abs().sum(-1)
    return section.ce_weight * ce + section.tv_weight * tv


def forward(module, head, batch, cfg):
    return kind_dflash.forward(module, head, batch, cfg, step_loss=step_loss)


def export(drafter: DSparkDrafter, export_dir, cfg):
    from eagle3_core.stages.train.export import export_drafter

    return export_drafter(drafter, export_dir, cfg.ships_embedding)


def check(cfg, inputs) -> None:
    """What the target must meet before training: a noise token inside its vocabulary, layer ids
    vLLM's ``dspark_target_layer_ids`` (aux id - 1) can name, a Markov rank no larger than the
    draft vocabulary (the bigram bias has no more rank to give), and a block inside the target's
    positions."""
    from eagle3_core.errors import ConfigError

    section = cfg.dspark
    kind_dflash.check_token("train.dspark.noise_token_id", section.noise_token_id, inputs.vocab_size)
    kind_dflash.check_layers(inputs, "DSpark")
    if section.markov_rank > inputs.draft_vocab_size:
        raise ConfigError(
            f"train.dspark.markov_rank {section.markov_rank} exceeds the draft vocabulary ({inputs.draft_vocab_size} "
            "tokens): the Markov head's bias (V x r, r x V_d) has rank at most V_d",
            fix=f"set train.dspark.markov_rank to at most {inputs.draft_vocab_size}",
        )
    positions = int(inputs.target_config.get("max_position_embeddings") or 0)
    if positions and section.block_size >= positions:
        raise ConfigError(
            f"train.dspark.block_size {section.block_size}: a block after any context needs "
            f"block_size < the target's max_position_embeddings ({positions})",
            fix=f"set train.dspark.block_size below {positions}",
        )


def facts(cfg) -> dict:
    block = cfg.dspark.block_size
    return {"block_size": block, "num_speculative_tokens": block, "markov_rank": cfg.dspark.markov_rank}


TRAINING = KindTraining(build=build, forward=forward, export=export, facts=facts, check=check)
