"""Small builders the trainer composes: the drafter, the target's head, the data reader.

Each returns one component and can be built cheaply in a test.
"""

from __future__ import annotations

from pathlib import Path

import torch

from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter, load_target_tensor, without_aliases
from eagle3_core.errors import InputError
from eagle3_core.stages.train.inputs import TrainInputs
from eagle3_core.stages.train.loss import TargetHead


def load_vocab(vocab_file: str) -> tuple[torch.Tensor, torch.Tensor]:
    from safetensors.torch import load_file

    tensors = load_file(vocab_file)
    return tensors["d2t"].long(), tensors["t2d"].bool()


def build_drafter(
    inputs: TrainInputs,
    seed: int,
    init_from: str | None = None,
    shape: dict | None = None,
    variant: dict | None = None,
) -> Eagle3Drafter:
    """A fresh drafter for the target (seeded init), with the target's frozen embedding and the vocab.

    ``shape`` (``TrainConfig.drafter`` as a dict) overrides the heads and widths copied from the target;
    ``variant`` (``TrainConfig.variant.architecture()``) sets the architecture.
    """
    config = DrafterConfig.from_target(
        inputs.target_config, inputs.draft_vocab_size, inputs.aux_layer_ids, shape, variant
    )
    if config.num_attention_heads % config.num_key_value_heads:
        raise InputError(
            f"the drafter's {config.num_key_value_heads} KV heads do not divide its "
            f"{config.num_attention_heads} attention heads",
            path=inputs.target_path,
            fix="set both train.drafter.num_attention_heads and train.drafter.num_key_value_heads",
        )
    if config.hidden_size % config.num_attention_heads:  # the export is a Llama config: vLLM could not load it
        raise InputError(
            f"the drafter's {config.num_attention_heads} attention heads do not divide the target's hidden size "
            f"{config.hidden_size}: vLLM refuses to load such a drafter (transformers' LlamaConfig: \"The hidden size "
            f'({config.hidden_size}) is not a multiple of the number of attention heads ({config.num_attention_heads})", '
            "whatever head_dim says)",
            path=inputs.target_path,
            fix="set train.drafter.num_attention_heads to a divisor of the target's hidden size (head_dim sets the "
            "per-head width), or leave train.drafter unset to copy the target's shape",
        )
    torch.manual_seed(seed)
    drafter = Eagle3Drafter(config)
    with torch.no_grad():
        drafter.embed_tokens.weight.copy_(load_target_tensor(inputs.target_path, "embed_tokens.weight").float())
    drafter.set_vocab(*load_vocab(inputs.vocab_file))
    if init_from:
        load_init_weights(drafter, init_from)
    return drafter


def resolve_init(init_from: str) -> Path:
    """An earlier drafter's export weights from its drafter/, checkpoints/ or export/ folder."""
    path = Path(init_from)
    for candidate in (
        path / "model.safetensors",
        path / "export" / "model.safetensors",
        path.parent / "export" / "model.safetensors",
    ):
        if candidate.exists():
            return candidate
    raise InputError(
        f"no drafter weights to start from at {path}",
        path=str(path),
        fix="point train.init_from at a trained drafter/ folder (with export/model.safetensors)",
    )


def load_init_weights(drafter: Eagle3Drafter, init_from: str) -> None:
    from safetensors.torch import load_file

    file = resolve_init(init_from)
    state = without_aliases(load_file(str(file)))
    d2t, _ = state.pop("d2t", None), state.pop("t2d", None)
    own = drafter.state_dict()
    wrong = [k for k, v in state.items() if k not in own or own[k].shape != v.shape]
    if wrong:
        raise InputError(
            f"the earlier drafter does not fit this one: {wrong[:3]} differ",
            path=str(file),
            fix="start from scratch (no init_from) when the target or draft vocab changed",
        )
    if "lm_head.weight" in state:
        state["lm_head.weight"] = lm_head_by_token(state["lm_head.weight"], d2t, drafter)
    drafter.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)


def lm_head_by_token(rows: torch.Tensor, d2t: torch.Tensor | None, drafter: Eagle3Drafter) -> torch.Tensor:
    """The earlier lm_head's rows put under this drafter's draft ids: a row belongs to a target token
    (the vocab stage picks the tokens anew from each dataset, e.g. each nightly version), so a token
    both vocabularies hold keeps its row and a token new to this one keeps its fresh row.
    ``d2t`` None: the earlier export's rows are in target order (its draft vocab was the full one)."""
    own = drafter.lm_head.weight.detach().float().clone()  # (V_d, H)
    earlier = torch.arange(len(rows)) + (d2t if d2t is not None else 0)  # target id of each earlier row
    row_of = torch.full((drafter.config.vocab_size,), -1, dtype=torch.long)
    inside = earlier < len(row_of)  # an earlier target's larger vocabulary: those tokens are gone
    row_of[earlier[inside]] = torch.arange(len(rows))[inside]
    found = row_of[drafter.to_target_ids(torch.arange(len(own)))]  # (V_d,) earlier row, or -1
    own[found >= 0] = rows[found[found >= 0]].float()
    return own


def build_target_head(inputs: TrainInputs, drafter: Eagle3Drafter, device) -> TargetHead:
    """The target's lm_head (or its tied embedding) over the draft vocabulary."""
    try:
        weight = load_target_tensor(inputs.target_path, "lm_head.weight")
    except InputError:
        weight = load_target_tensor(inputs.target_path, "embed_tokens.weight")  # tied embeddings
    return TargetHead(weight.to(device), drafter.d2t.to(device), drafter.t2d.to(device))


def build_reader(inputs: TrainInputs):
    """The reader of the run's source of hidden states (``sources.source_for``)."""
    from eagle3_core.stages.train.hidden_sources import source_for

    return source_for(inputs.mode).reader(inputs)
