"""The DFlash block drafter: its export holds the names and keys vLLM 0.32's loader reads, its
blocks see only what they would see at serving time, and its needs of the target are checked
before training."""

import json
import re

import pytest
import torch

from eagle3_core.drafter.dflash import DFlashConfig, DFlashDrafter, block_inputs, block_mask
from eagle3_core.drafter.kinds import KINDS, kind_of_export
from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import TrainConfig
from tests.fixtures.requirements import vllm_source

TARGET = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
}


def tiny(layers: int = 2, vocab: int = 50, draft: int = 20) -> DFlashDrafter:
    c = DFlashConfig.from_target(
        {**TARGET, "vocab_size": vocab},
        draft,
        [1, 2, 3],
        {"block_size": 4, "mask_token_id": 1, "num_hidden_layers": layers},
    )
    torch.manual_seed(0)
    drafter = DFlashDrafter(c)
    d2t = torch.arange(draft) * 2 - torch.arange(draft)  # draft id d is target id 2d
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[torch.arange(draft) * 2] = True
    drafter.set_vocab(d2t, t2d)
    return drafter


def test_the_export_names_the_architecture_vllm_registers_for_dflash(tmp_path):
    tiny().save_export(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    registry = vllm_source("model_executor/models/registry.py")
    assert f'"{config["architectures"][0]}": ("qwen3_dflash", "DFlashQwen3ForCausalLM")' in registry
    assert kind_of_export(tmp_path) is KINDS["dflash"]
    assert config["model_type"] == "qwen3"
    # vLLM adds 1 to each target_layer_id (eagle3_utils.get_eagle3_aux_layers_from_config): aux 1, 2, 3
    assert config["dflash_config"] == {"target_layer_ids": [0, 1, 2], "mask_token_id": 1}
    assert 'layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]' in vllm_source(
        "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
    )
    proposer = vllm_source("v1/spec_decode/llm_base_proposer.py")
    assert 'self.parallel_drafting_token_id = dflash_config["mask_token_id"]' in proposer


def vllm_parameter_names(source: str) -> set[str]:
    """The attribute names qwen3_dflash.py's modules hold (``self.<name> =``)."""
    return set(re.findall(r"self\.(\w+) = ", source))


def test_every_exported_weight_is_one_vllms_dflash_loader_maps_to_a_parameter(tmp_path):
    tiny().save_export(tmp_path)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as fh:
        names = set(fh.keys())
    source = vllm_source("model_executor/models/qwen3_dflash.py")
    held = vllm_parameter_names(source) | vllm_parameter_names(vllm_source("model_executor/models/qwen2.py"))
    # load_weights: t2d skipped, d2t -> draft_id_to_target_id; the stacked q/k/v and gate/up names
    stacked = {".q_proj", ".k_proj", ".v_proj", ".gate_proj", ".up_proj"}
    assert all(f'"{s}": (' in source for s in stacked)
    for name in names - {"t2d"}:
        parts = [p for p in name.replace("d2t", "draft_id_to_target_id").split(".") if not p.isdigit()]
        module_parts = [p for p in parts[:-1] if f".{p}" not in stacked]
        assert all(p in held or p == "layers" for p in module_parts), name
    assert "embed_tokens.weight" not in names  # vLLM shares the target's
    expected = {"fc.weight", "hidden_norm.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"}
    assert expected <= names and "layers.1.self_attn.k_norm.weight" in names


def test_the_export_loads_back_to_the_same_drafter(tmp_path):
    drafter = tiny()
    drafter.save_export(tmp_path)
    embed = drafter.embed_tokens.weight.detach().clone()
    state = drafter.state_dict()
    (tmp_path / "target").mkdir()
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": embed}, str(tmp_path / "target" / "model.safetensors"))
    back = DFlashDrafter.from_export(tmp_path, tmp_path / "target")
    for k, v in back.state_dict().items():
        assert torch.allclose(v.float(), state[k].float(), atol=1e-2), k  # bf16 on disk


def test_a_block_sees_the_context_before_its_anchor_in_its_own_sample_and_nothing_else():
    drafter = tiny().eval()
    B, T = 1, 12
    segments = torch.tensor([[1] * 8 + [2] * 4])
    ids = torch.randint(0, 50, (B, T))
    anchors, keep = torch.tensor([[5, 10]]), torch.tensor([[True, True]])
    context = torch.randn(B, T, 32)
    positions = torch.arange(T)[None]
    block_ids, block_pos = block_inputs(ids, anchors, positions.gather(1, anchors), drafter.config)
    mask = block_mask(anchors, keep, segments, T, drafter.config.block_size)
    before = drafter(block_ids, block_pos, context, positions, mask)
    changed = context.clone()
    changed[:, 5:8] += 1.0  # at and after the first anchor (5), in its sample
    changed[:, 8:10] += 1.0  # the second anchor's (10) own sample, before it
    after = drafter(block_ids, block_pos, changed, positions, mask)
    assert torch.equal(before[:, :4], after[:, :4])  # the first block never sees t >= 5
    assert not torch.allclose(before[:, 4:], after[:, 4:])  # the second sees 8, 9
    assert block_ids[0].tolist() == [ids[0, 5].item(), 1, 1, 1, ids[0, 10].item(), 1, 1, 1]


def test_the_loss_counts_a_slot_only_where_its_token_is_supervised_in_the_anchors_sample():
    from eagle3_core.stages.train.kind_dflash import forward
    from eagle3_core.stages.train.loss import TargetHead

    drafter = tiny()
    head = TargetHead(torch.randn(50, 32), drafter.d2t, drafter.t2d)
    T = 30
    batch = {
        "input_ids": torch.randint(0, 50, (1, T)),
        "aux": torch.randn(1, T, 3, 32),
        "final": torch.randn(1, T, 32),
        "loss_mask": torch.zeros(1, T, dtype=torch.bool),
        "segments": torch.ones(1, T, dtype=torch.long),
    }
    batch["loss_mask"][0, 20] = True  # one supervised token: anchors 17..19 reach it at slots 3..1
    head.t2d[:] = True  # every target top token is in the draft vocab
    cfg = TrainConfig(kind="dflash", dflash={"mask_token_id": 1})
    loss, counts = forward(drafter, head, batch, cfg)
    loss.backward()
    assert counts.count == [1, 0, 0]  # only anchor 19 is drawn (loss_mask[a+1]); its slot 1 is token 20
    assert drafter.fc.weight.grad.abs().sum() > 0


def test_a_dflash_run_without_a_mask_token_is_one_config_error_naming_the_field():
    with pytest.raises(ValueError, match=r"train\.dflash\.mask_token_id"):
        TrainConfig(kind="dflash")


def test_a_mask_token_outside_the_vocab_or_a_layer_id_vllm_cannot_name_is_refused_before_training():
    from types import SimpleNamespace

    from eagle3_core.stages.train.kind_dflash import check

    cfg = TrainConfig(kind="dflash", dflash={"mask_token_id": 400})
    inputs = SimpleNamespace(vocab_size=374, target_config={"num_hidden_layers": 4}, aux_layer_ids=[1, 2, 3])
    with pytest.raises(ConfigError, match=r"train\.dflash\.mask_token_id 400 .* \(0\.\.373\)"):
        check(cfg, inputs)
    cfg = TrainConfig(kind="dflash", dflash={"mask_token_id": 1})
    with pytest.raises(ConfigError, match=r"target\.aux_layer_ids \[0, 1, 2\].* in 1\.\.3"):
        check(cfg, SimpleNamespace(**{**vars(inputs), "aux_layer_ids": [0, 1, 2]}))
    check(cfg, inputs)  # the toy's: fine


def test_the_kind_decides_the_trained_weights():
    from tests.stages.train.keys import train_key

    assert train_key(TrainConfig(kind="dflash", dflash={"mask_token_id": 1})) != train_key(TrainConfig())


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_a_full_draft_vocab_ships_no_mapping_since_vllm_then_has_none_to_load(kind, tmp_path):
    from safetensors.torch import load_file

    from eagle3_core.drafter.dspark import DSparkConfig, DSparkDrafter

    section = {"block_size": 4, "mask_token_id": 1, "noise_token_id": 1, "markov_rank": 8, "num_hidden_layers": 1}
    config_class, model_class = (DFlashConfig, DFlashDrafter) if kind == "dflash" else (DSparkConfig, DSparkDrafter)
    torch.manual_seed(0)
    drafter = model_class(config_class.from_target({**TARGET, "vocab_size": 50}, 50, [1, 2, 3], section))
    drafter.save_export(tmp_path)
    assert not {"d2t", "t2d"} & set(load_file(str(tmp_path / "model.safetensors")))
    # vLLM builds draft_id_to_target_id only for a smaller draft vocab (a shipped d2t would be an unknown key)
    source = vllm_source(f"model_executor/models/qwen3_{kind}.py")
    assert (
        "draft_vocab_size < self.target_vocab_size" if kind == "dspark" else "draft_vocab_size != target_vocab_size"
    ) in source
    back = model_class.from_export(tmp_path, embed_tokens=drafter.embed_tokens.weight.detach())
    assert torch.equal(back.to_target_ids(torch.arange(50)), torch.arange(50)) and bool(back.t2d.all())
