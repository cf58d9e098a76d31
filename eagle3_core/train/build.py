"""Small builders the trainer composes: the drafter, the target's head, the data reader.

Each returns one component and can be built cheaply in a test.
"""

from __future__ import annotations

from pathlib import Path

import torch

from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter, load_target_tensor
from eagle3_core.errors import InputError
from eagle3_core.train.inputs import TrainInputs
from eagle3_core.train.loss import TargetHead


def load_vocab(vocab_file: str) -> tuple[torch.Tensor, torch.Tensor]:
    from safetensors.torch import load_file

    tensors = load_file(vocab_file)
    return tensors["d2t"].long(), tensors["t2d"].bool()


def build_drafter(
    inputs: TrainInputs, seed: int, init_from: str | None = None, shape: dict | None = None
) -> Eagle3Drafter:
    """A fresh drafter for the target (seeded init), with the target's frozen embedding and the vocab.

    ``shape`` (``TrainConfig.drafter`` as a dict) overrides the heads and widths copied from the target.
    """
    config = DrafterConfig.from_target(inputs.target_config, inputs.draft_vocab_size, inputs.aux_layer_ids, shape)
    if config.num_attention_heads % config.num_key_value_heads:
        raise InputError(
            f"the drafter's {config.num_key_value_heads} KV heads do not divide its "
            f"{config.num_attention_heads} attention heads",
            path=inputs.target_path,
            fix="set both train.drafter.num_attention_heads and train.drafter.num_key_value_heads",
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
    state = {k: v for k, v in load_file(str(file)).items() if k not in ("d2t", "t2d")}
    own = drafter.state_dict()
    wrong = [k for k, v in state.items() if k not in own or own[k].shape != v.shape]
    if wrong:
        raise InputError(
            f"the earlier drafter does not fit this one: {wrong[:3]} differ",
            path=str(file),
            fix="start from scratch (no init_from) when the target or draft vocab changed",
        )
    drafter.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)


def build_target_head(inputs: TrainInputs, drafter: Eagle3Drafter, device) -> TargetHead:
    """The target's lm_head (or its tied embedding) over the draft vocabulary."""
    try:
        weight = load_target_tensor(inputs.target_path, "lm_head.weight")
    except InputError:
        weight = load_target_tensor(inputs.target_path, "embed_tokens.weight")  # tied embeddings
    return TargetHead(weight.to(device), drafter.d2t.to(device), drafter.t2d.to(device))


def build_reader(inputs: TrainInputs):
    from eagle3_core.train.data import OfflineReader, OnlineReader

    if inputs.mode == "offline":
        return OfflineReader(inputs.hidden_dir)
    if inputs.mode == "online-vllm":
        from eagle3_core.train.online_vllm import SpoolReader

        return SpoolReader(inputs.sequences_dir, inputs.spool["dir"], inputs.spool["run_id"], inputs.spool["timeout_s"])
    return OnlineReader(inputs.sequences_dir, inputs.target_path, inputs.aux_layer_ids)
