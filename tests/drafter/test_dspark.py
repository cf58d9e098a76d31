"""The DSpark drafter: its export holds the names and keys vLLM 0.32's loader and speculator read, its
steps are DFlash's block plus the Markov bias of the token before each, and its needs of the target
are checked before training."""

import json
from types import SimpleNamespace

import pytest
import torch

from eagle3_core.drafter.dspark import DSparkConfig, DSparkDrafter
from eagle3_core.drafter.kinds import KINDS, aux_layer_ids, drafter_class, kind_of_export
from eagle3_core.errors import ConfigError
from eagle3_core.stages.train.config import TrainConfig
from tests.drafter.test_dflash import TARGET
from tests.fixtures.requirements import vllm_source

RANK = 8


def tiny(block: int = 3, vocab: int = 50, draft: int = 20) -> DSparkDrafter:
    c = DSparkConfig.from_target(
        {**TARGET, "vocab_size": vocab},
        draft,
        [1, 2, 3],
        {"block_size": block, "noise_token_id": 1, "num_hidden_layers": 2, "markov_rank": RANK},
    )
    torch.manual_seed(0)
    drafter = DSparkDrafter(c)
    torch.nn.init.normal_(drafter.markov_head.markov_w2.weight)  # a trained head: the bias matters
    d2t = torch.arange(draft) * 2 - torch.arange(draft)  # draft id d is target id 2d
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[torch.arange(draft) * 2] = True
    drafter.set_vocab(d2t, t2d)
    return drafter.eval()


def test_the_export_is_the_qwen3_dspark_checkpoint_vllm_registers_and_reads(tmp_path):
    tiny().save_export(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    registry = vllm_source("model_executor/models/registry.py")
    assert '"Qwen3DSparkModel": ("qwen3_dspark", "Qwen3DSparkForCausalLM")' in registry
    assert kind_of_export(tmp_path) is KINDS["dspark"] and config["model_type"] == "qwen3"
    # vLLM adds 1 to dspark_target_layer_ids (eagle3_utils.get_eagle3_aux_layers_from_config)
    assert config["dspark_target_layer_ids"] == [0, 1, 2] and aux_layer_ids(config) == [1, 2, 3]
    assert "layer_ids = [i + 1 for i in dspark_layer_ids]" in vllm_source(
        "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
    )
    assert config["dspark_noise_token_id"] == 1  # the proposer's parallel_drafting_token_id
    assert "return int(hf_config.dspark_noise_token_id)" in vllm_source("v1/worker/gpu/spec_decode/utils.py")
    assert config["markov_rank"] == RANK and config["markov_head_type"] == "vanilla"
    assert config["sample_from_anchor"] is True and config["dspark_bonus_anchor"] is False
    assert config["block_size"] == 3 and "dflash_config" not in config


def test_every_exported_weight_is_one_vllms_dspark_loader_maps_to_a_parameter(tmp_path):
    from safetensors import safe_open

    tiny().save_export(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as fh:
        shapes = {k: list(fh.get_slice(k).get_shape()) for k in fh.keys()}
    source = vllm_source("model_executor/models/qwen3_dspark.py")
    assert "self.markov_w1 = nn.Embedding(vocab_size, markov_rank)" in source
    assert shapes["markov_head.markov_w1.weight"] == [50, RANK]  # indexed by target ids
    assert shapes["markov_head.markov_w2.weight"] == [20, RANK]  # ParallelLMHead(draft_vocab_size, markov_rank)
    assert shapes["lm_head.weight"] == [20, 32] and "d2t" in shapes  # a reduced draft vocab needs both
    assert "embed_tokens.weight" not in shapes and not any("confidence" in k for k in shapes)


def test_the_export_loads_back_to_the_same_drafter(tmp_path):
    drafter = tiny()
    drafter.save_export(tmp_path)
    back = drafter_class(kind_of_export(tmp_path)).from_export(tmp_path, embed_tokens=drafter.embed_tokens.weight)
    assert isinstance(back, DSparkDrafter) and back.config == drafter.config
    state = drafter.state_dict()
    for k, v in back.state_dict().items():
        assert torch.allclose(v.float(), state[k].float(), atol=5e-2), k  # bf16 on disk


def test_each_step_adds_the_markov_bias_of_the_token_drafted_before_it():
    drafter = tiny()
    T = 9
    aux = torch.randn(1, T, 96)
    drafts = drafter.propose(aux, anchor=7, k=3)  # the block anchored at position T sees states 0..T-1
    context = drafter.context(aux.view(1, T, 3, 32))
    ids = torch.tensor([[7, 1, 1]])
    r = drafter(ids, torch.arange(T, T + 3)[None], context, torch.arange(T)[None], torch.ones(1, 1, 3, T + 3).bool())
    base = drafter.logits(r)[0]  # (3, V_d): slot i predicts the token i + 1 after the anchor
    prev = [7, *drafts[:-1]]
    bias = drafter.markov_head.markov_w2.weight @ drafter.markov_head.markov_w1.weight[torch.tensor(prev)].T
    expected = drafter.to_target_ids((base + bias.T).argmax(-1)).tolist()
    assert drafts == expected
    assert drafts != drafter.to_target_ids(base.argmax(-1)).tolist()  # the bias changes the drafts here


def test_the_replay_counts_the_same_accepted_run_as_drafting_on_its_own_tokens():
    """block_predictions chains on the true tokens: where drafting would have written them, the same."""
    drafter = tiny()
    T, k = 12, 3
    seq = torch.randint(0, 50, (1, T))
    aux = torch.randn(1, T, 3, 32)
    i = 5  # the block anchored at i + 1 sees states 0..i
    drafts = drafter.propose(aux[:, : i + 1].flatten(2), int(seq[0, i + 1]), k)
    seq[0, i + 2 : i + 2 + k] = torch.tensor(drafts)  # the truth is what it drafts: every step accepted
    assert drafter.block_predictions(seq, aux, k)[:, i].tolist() == drafts


def test_the_loss_trains_the_markov_head_and_counts_the_anchor_slot_as_step_one():
    from eagle3_core.stages.train.kind_dspark import forward
    from eagle3_core.stages.train.loss import TargetHead

    drafter = tiny().train()
    head = TargetHead(torch.randn(50, 32), drafter.d2t, drafter.t2d)
    head.t2d[:] = True
    T = 30
    batch = {
        "input_ids": torch.randint(0, 50, (1, T)),
        "aux": torch.randn(1, T, 3, 32),
        "final": torch.randn(1, T, 32),
        "loss_mask": torch.zeros(1, T, dtype=torch.bool),
        "segments": torch.ones(1, T, dtype=torch.long),
    }
    batch["loss_mask"][0, 20] = True  # one supervised token: anchor 19 predicts it at step 1 (its own slot)
    cfg = TrainConfig(kind="dspark", dspark={"noise_token_id": 1, "markov_rank": RANK})
    loss, counts = forward(drafter, head, batch, cfg)
    loss.backward()
    assert counts.count == [1, 0, 0]  # k = block_size = 3 steps
    assert drafter.markov_head.markov_w2.weight.grad.abs().sum() > 0
    assert 0 < float(loss) < 0.1 * 20 + 0.9  # ce_w x CE (log 20 at most a few) + tv_w x TV (<= 1)


def test_a_dspark_run_without_a_noise_token_is_one_config_error_naming_the_field():
    with pytest.raises(ValueError, match=r"train\.dspark\.noise_token_id"):
        TrainConfig(kind="dspark")
    with pytest.raises(ValueError, match=r"dspark\.block_size"):
        TrainConfig(kind="dspark", dspark={"noise_token_id": 1, "block_size": 0})  # vLLM: num_speculative_tokens > 0
    with pytest.raises(ValueError, match=r"dspark\.markov_rank"):
        TrainConfig(kind="dspark", dspark={"noise_token_id": 1, "markov_rank": 0})  # vLLM: a positive markov_rank


@pytest.mark.parametrize(
    ("dspark", "change", "message"),
    [
        ({"noise_token_id": 400}, {}, r"train\.dspark\.noise_token_id 400 .* \(0\.\.373\)"),
        ({"noise_token_id": 1}, {"aux_layer_ids": [0, 1, 2]}, r"target\.aux_layer_ids \[0, 1, 2\].* in 1\.\.3"),
        ({"noise_token_id": 1, "markov_rank": 64}, {}, r"train\.dspark\.markov_rank 64 .* \(40 tokens\)"),
        ({"noise_token_id": 1, "block_size": 64}, {"max_positions": 64}, r"train\.dspark\.block_size 64.* \(64\)"),
    ],
)
def test_a_setting_the_target_cannot_meet_is_one_config_error_before_training(dspark, change, message):
    from eagle3_core.stages.train.kind_dspark import check

    target = {"num_hidden_layers": 4, "max_position_embeddings": change.pop("max_positions", 2048)}
    inputs = SimpleNamespace(vocab_size=374, draft_vocab_size=40, target_config=target, aux_layer_ids=[1, 2, 3])
    cfg = TrainConfig(kind="dspark", dspark={"markov_rank": 16, **dspark})
    with pytest.raises(ConfigError, match=message):
        check(cfg, SimpleNamespace(**{**vars(inputs), **change}))


def test_the_toys_settings_pass_and_no_kinds_hash_moves_with_another_kinds_section():
    from eagle3_core.stages.train.kind_dspark import check

    inputs = SimpleNamespace(
        vocab_size=374, draft_vocab_size=40, target_config={"num_hidden_layers": 4}, aux_layer_ids=[1, 2, 3]
    )
    check(TrainConfig(kind="dspark", dspark={"noise_token_id": 1, "markov_rank": 16}), inputs)
    from tests.stages.train.keys import train_key

    assert train_key(TrainConfig(dspark={"noise_token_id": 1})) == train_key(TrainConfig())
    dflash = TrainConfig(kind="dflash", dflash={"mask_token_id": 1})
    assert train_key(dflash) == train_key(TrainConfig(**{**dflash.model_dump(), "dspark": {"markov_rank": 2}}))
    assert train_key(dflash) != train_key(dflash.model_copy(update={"dflash": {"mask_token_id": 2}}))
