"""DFlash's training hooks: the block drafter of ``drafter/dflash.py`` and its block-parallel loss.

The anchors, the blocks, the grouping and the counts serve every block kind: DSpark
(``kind_dspark.py``) passes its model class and its per-step loss to ``build`` and ``forward``.

Loss (DFlash, arXiv 2602.06036, section 3; SpecForge's trainer draws anchors the same way):

    anchors  a ~ the positions whose next token is supervised (loss_mask[a+1], same sample), at
             most ``anchors_per_row`` per row, drawn without replacement
    block    [x_a, m, ..., m] at positions a .. a+Bk-1; it sees the target's features at t < a
    loss_j   = mean over counted blocks of  -Σ_v p_target(v | x_{<a+j}) log p_draft_j(v)
    loss     = Σ_{j=1}^{Bk-1} exp(-(j-1)/γ) loss_j
    acc_j    = share of counted blocks where argmax p_draft_j == argmax p_target

p_target is the target's distribution on the draft vocab at position a+j-1 (its logits there
predict x_{a+j}), as in EAGLE-3's loss; slot j counts when x_{a+j} is supervised, belongs to the
anchor's sample and the target's own top token there is in the draft vocab. ``acc_j`` sits where
EAGLE-3's TTT step j-1 does, so the simulated acceptance length reads the same.

Anchors are drawn from a generator seeded by ``train.seed`` and the batch's tokens, so a resumed
run draws the blocks the killed one would have. Blocks are computed in groups under activation
checkpointing: a group's scores (heads x slots x (T + slots)) stay near ``GROUP_ELEMENTS``, so a
16K-token row costs one group's attention, never all blocks' at once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from eagle3_core.drafter.attention import segment_positions
from eagle3_core.drafter.dflash import DFlashConfig, DFlashDrafter, block_inputs, block_mask
from eagle3_core.stages.train.kind_hooks import KindTraining
from eagle3_core.stages.train.loss import StepCounts

# Attention scores per block group: 2^26 fp32 elements is 256 MiB, a few copies in backward.
GROUP_ELEMENTS = 1 << 26


def build(inputs, cfg, init_from: str | None = None, model_class=DFlashDrafter) -> DFlashDrafter:
    """A fresh block drafter of ``model_class`` for the target, shaped by the run's kind section."""
    from eagle3_core.drafter.model import load_target_tensor
    from eagle3_core.stages.train.build import load_vocab

    config = model_class.config_class.from_target(
        inputs.target_config,
        inputs.draft_vocab_size,
        inputs.aux_layer_ids,
        getattr(cfg, cfg.kind).model_dump(),
        cfg.drafter.model_dump(),
    )
    torch.manual_seed(cfg.seed)
    drafter = model_class(config)
    with torch.no_grad():
        drafter.embed_tokens.weight.copy_(load_target_tensor(inputs.target_path, "embed_tokens.weight").float())
    drafter.set_vocab(*load_vocab(inputs.vocab_file))
    return drafter


def draw_anchors(loss_mask, segments, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(anchors (B, N), keep (B, N) bool): up to ``count`` anchors a per row with loss_mask[a+1]
    in a's own sample and a context before a (a >= 1), sorted; padding anchors are 0 with keep False."""
    B, T = loss_mask.shape
    valid = torch.zeros(B, T, dtype=torch.bool, device=loss_mask.device)
    valid[:, 1:-1] = loss_mask[:, 2:].bool() & (segments[:, 2:] == segments[:, 1:-1]) & (segments[:, 1:-1] > 0)
    gen = torch.Generator().manual_seed(seed)
    keys = torch.rand(B, T, generator=gen).to(loss_mask.device).masked_fill(~valid, 2.0)
    n = max(1, min(count, int(valid.sum(1).max())))
    picked = keys.topk(n, dim=1, largest=False)  # the n smallest keys: a uniform draw among valid
    keep = picked.values < 2.0
    anchors = torch.where(keep, picked.indices, 0)
    order = torch.where(keep, anchors, T).argsort(1)  # real anchors first, in position order
    return anchors.gather(1, order), keep.gather(1, order)


def batch_seed(batch: dict, seed: int) -> int:
    """A seed from the batch's tokens: the same batch draws the same anchors, resumed or not."""
    ids = batch["input_ids"].long()
    return (seed * 1_000_003 + int((ids * torch.arange(1, ids.shape[1] + 1, device=ids.device)).sum())) % (1 << 62)


def soft_ce(logits: torch.Tensor, p: torch.Tensor, top: torch.Tensor, section) -> torch.Tensor:
    """DFlash's per-block loss at one step: -Σ_v p_target(v) log p_draft(v), (B, N)."""
    return -(p * F.log_softmax(logits, -1)).sum(-1)


def _group_loss(module, context, ctx_pos, batch, anchors, keep, counted_fn, step_loss, section):
    """One group of blocks: per draft step j = 1..k the summed ``step_loss`` and correct top-1s.
    Step j is read at slot j - ahead and ``chain``ed on the true token before it, x_{a+j-1}."""
    c: DFlashConfig = module.config
    ids, positions = block_inputs(batch["input_ids"], anchors, ctx_pos.gather(1, anchors), c)  # (B, Q)
    mask = block_mask(anchors, keep, batch["segments"], context.shape[1], c.block_size)
    r = module(ids, positions, context, ctx_pos, mask)  # (B, Q, H)
    logits = module.logits(r).float().view(*anchors.shape, c.block_size, -1)  # (B, N, Bk, V_d)
    T = batch["input_ids"].shape[1]
    loss, right = [], []
    for j in range(1, c.block_size + module.ahead):
        p, counted, top = counted_fn(anchors, keep, j)  # (B, N, V_d), (B, N), (B, N)
        prev = batch["input_ids"].gather(1, (anchors + j - 1).clamp(max=T - 1))  # (B, N)
        lj = module.chain(logits[:, :, j - module.ahead], prev).float()
        loss.append((step_loss(lj, p, top, section) * counted).sum())
        right.append(((lj.argmax(-1) == top) & counted).sum())
    return torch.stack(loss), torch.stack(right)


def forward(module, head, batch, cfg, step_loss=soft_ce):
    """(Σ_j w_j loss_j, StepCounts over the draft steps j = 1 .. k) for one micro-batch; the kind's
    section of the config (``cfg.<kind>``) sets the anchors and the decay, ``step_loss`` the loss."""
    section = getattr(cfg, cfg.kind)
    probs, in_draft = head.labels(batch["final"])  # (B, T, V_d), (B, T)
    top, mask, seg = probs.argmax(-1), batch["loss_mask"].bool(), batch["segments"]
    T = mask.shape[1]
    anchors, keep = draw_anchors(mask, seg, section.anchors_per_row, batch_seed(batch, cfg.seed))

    def counted_fn(a, k, j):
        label = (a + j).clamp(max=T - 1)  # (B, N) the predicted token
        inside = (a + j < T) & k
        counted = (
            inside & mask.gather(1, label) & in_draft.gather(1, label - 1) & (seg.gather(1, label) == seg.gather(1, a))
        )
        p = probs.gather(1, (label - 1)[..., None].expand(-1, -1, probs.shape[-1]))
        return p, counted, top.gather(1, label - 1)

    context = module.context(batch["aux"])  # (B, T, H)
    ctx_pos = segment_positions(seg)
    slots, steps = module.config.block_size, module.config.block_size - 1 + module.ahead
    group = max(1, GROUP_ELEMENTS // max(1, mask.shape[0] * module.config.num_attention_heads * slots * (T + slots)))
    loss = context.new_zeros(steps, dtype=torch.float32)
    right = torch.zeros(steps, dtype=torch.long)
    for s in range(0, anchors.shape[1], group):
        part_anchors, part_keep = anchors[:, s : s + group], keep[:, s : s + group]
        args = (module, context, ctx_pos, batch, part_anchors, part_keep, counted_fn, step_loss, section)
        part, ok = (
            checkpoint(_group_loss, *args, use_reentrant=False) if torch.is_grad_enabled() else _group_loss(*args)
        )
        loss, right = loss + part, right + ok.cpu()
    return _total(loss, right, anchors, keep, counted_fn, section.loss_decay_gamma)


def _total(loss_sum, right, anchors, keep, counted_fn, gamma: float):
    counts, total = StepCounts(), loss_sum.new_zeros(())
    for j in range(1, len(loss_sum) + 1):
        n = int(counted_fn(anchors, keep, j)[1].sum())
        loss_j = loss_sum[j - 1] / max(n, 1)
        total = total + torch.exp(torch.tensor(-(j - 1) / gamma)) * loss_j
        counts.loss.append(float(loss_j.detach()))
        counts.count.append(n)
        counts.correct.append(int(right[j - 1]))
    return total, counts


def export(drafter: DFlashDrafter, export_dir, cfg):
    from eagle3_core.stages.train.export import export_drafter

    return export_drafter(drafter, export_dir, cfg.ships_embedding)


def check(cfg, inputs) -> None:
    """What the target must meet before training: a mask token inside its vocabulary, and layer ids
    that vLLM's ``target_layer_ids`` (aux id - 1, counted from 0) can name."""
    check_token("train.dflash.mask_token_id", cfg.dflash.mask_token_id, inputs.vocab_size)
    check_layers(inputs, "DFlash")


def check_token(field: str, token: int | None, vocab: int) -> None:
    """A block kind's filler token (DFlash's mask, DSpark's noise) is a row of the target's embedding."""
    from eagle3_core.errors import ConfigError

    if token is None or not 0 <= token < vocab:
        raise ConfigError(
            f"{field} {token} is not a token of the target's vocabulary (0..{vocab - 1})",
            fix=f"set {field} to a token id the target never writes (a pad or reserved token)",
        )


def check_layers(inputs, title: str) -> None:
    """A block kind's export names layer outputs (vLLM's target_layer_ids = aux id - 1, from 0)."""
    from eagle3_core.errors import ConfigError

    layers = int(inputs.target_config.get("num_hidden_layers") or 0)
    if not all(1 <= k < layers for k in inputs.aux_layer_ids):
        raise ConfigError(
            f"target.aux_layer_ids {inputs.aux_layer_ids}: a {title} drafter reads layer outputs 0..{layers - 2} "
            f"of this {layers}-layer target (vLLM's target_layer_ids = aux id - 1), so each id must be in 1..{layers - 1}",
            fix="pass aux layer ids of at least 1 (vLLM counting: the input of decoder layer k)",
        )


def facts(cfg) -> dict:
    return {"block_size": cfg.dflash.block_size, "num_speculative_tokens": cfg.dflash.block_size - 1}


TRAINING = KindTraining(build=build, forward=forward, export=export, facts=facts, check=check)
