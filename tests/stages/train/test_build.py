"""The trainer's builders: the target's frozen embedding and vocab go in; an earlier drafter can seed it."""

import pytest
import torch

from eagle3_core.drafter.model import load_target_tensor
from eagle3_core.errors import InputError
from eagle3_core.stages.train.build import build_drafter
from eagle3_core.stages.train.hidden_sources import check_inputs
from eagle3_core.target.config import TargetConfig


@pytest.fixture
def inputs(tiny_run):
    return check_inputs("offline", TargetConfig(path=str(tiny_run.target)), tiny_run.hidden, tiny_run.vocab)


def test_the_drafter_gets_the_targets_embedding_the_vocab_and_the_extracted_layers(inputs, tiny_run):
    from safetensors.torch import load_file

    drafter = build_drafter(inputs, seed=0)
    assert torch.equal(drafter.embed_tokens.weight, load_target_tensor(tiny_run.target, "embed_tokens.weight"))
    assert torch.equal(drafter.d2t, load_file(str(tiny_run.vocab / "vocab.safetensors"))["d2t"])
    assert drafter.config.aux_layer_ids == [1, 2, 3] and drafter.config.draft_vocab_size == 48


def test_init_from_an_earlier_drafter_folder_loads_its_weights(inputs, tmp_path):
    earlier = build_drafter(inputs, seed=1)
    earlier.save_export(tmp_path / "drafter" / "export")
    seeded = build_drafter(inputs, seed=0, init_from=str(tmp_path / "drafter" / "checkpoints"))
    assert torch.equal(seeded.fc.weight, earlier.fc.weight.bfloat16().float())


def test_init_from_a_drafter_whose_draft_vocab_chose_other_tokens_keeps_each_tokens_lm_head_row(inputs, tmp_path):
    """The nightly rebuilds vocab/ from each new version and starts from the last drafter: a row of
    lm_head belongs to a target token, so a token both vocabularies hold keeps its row wherever
    the new draft ids put it, and a new token gets a fresh row."""
    earlier = build_drafter(inputs, seed=1)
    targets = earlier.to_target_ids(torch.arange(48))  # this vocab's target ids, increasing
    outside = max(set(range(96)) - set(targets.tolist()))
    old = torch.sort(torch.cat([targets[1:], torch.tensor([outside])])).values  # one token swapped
    t2d = torch.zeros(96, dtype=torch.bool)
    t2d[old] = True
    earlier.set_vocab(old - torch.arange(48), t2d)
    earlier.save_export(tmp_path / "export")
    seeded = build_drafter(inputs, seed=0, init_from=str(tmp_path / "export"))
    fresh = build_drafter(inputs, seed=0)
    rows = {int(t): d for d, t in enumerate(old)}
    for d, t in enumerate(targets.tolist()):
        want = earlier.lm_head.weight[rows[t]].bfloat16().float() if t in rows else fresh.lm_head.weight[d]
        assert torch.equal(seeded.lm_head.weight[d], want), (d, t)
    assert torch.equal(seeded.fc.weight, earlier.fc.weight.bfloat16().float())


def test_init_from_a_drafter_of_another_draft_vocab_is_refused(inputs, tmp_path):
    from dataclasses import replace

    from eagle3_core.drafter.model import Eagle3Drafter

    other = Eagle3Drafter(replace(build_drafter(inputs, 0).config, draft_vocab_size=32))
    other.save_export(tmp_path / "export")
    with pytest.raises(InputError, match="does not fit this one"):
        build_drafter(inputs, seed=0, init_from=str(tmp_path / "export"))
    with pytest.raises(InputError, match="no drafter weights to start from"):
        build_drafter(inputs, seed=0, init_from=str(tmp_path / "elsewhere" / "nothing"))


def test_a_target_without_the_tensor_is_an_input_error_naming_its_files(tmp_path):
    with pytest.raises(InputError, match="no tensor named 'lm_head.weight'") as err:
        load_target_tensor(tmp_path, "lm_head.weight")
    assert f"{tmp_path}/*.safetensors" in str(err.value) and "fix:" in str(err.value)


def test_the_recipe_shape_replaces_the_targets_heads_and_mlp_width(inputs):
    shape = {"num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 96}
    drafter = build_drafter(inputs, seed=0, shape=shape)
    c = drafter.config
    assert (c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size) == (4, 1, 16, 96)
    assert drafter.midlayer.self_attn.k_proj.weight.shape == (16, 2 * c.hidden_size)
    assert c.trainable_parameters() == sum(p.numel() for p in drafter.parameters() if p.requires_grad)
    assert build_drafter(inputs, seed=0).config.num_attention_heads == 2  # unset: the target's


def test_kimi_recipe_drafter_uses_gqa_with_a_seventh_of_the_kv_cache_of_a_copied_mla_shape():
    from eagle3_core.config import PipelineConfig
    from eagle3_core.drafter.model import DrafterConfig

    kimi = {
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "head_dim": 112,
        "vocab_size": 163840,
    }
    shape = PipelineConfig.from_yaml("configs/kimi-k2.5.yaml").train.drafter.model_dump()
    ours, copied = (
        DrafterConfig.from_target(kimi, 32000, [2, 30, 58], shape),
        DrafterConfig.from_target(kimi, 32000, [2, 30, 58]),
    )
    assert ours.num_key_value_heads * ours.head_dim * 7 == copied.num_key_value_heads * copied.head_dim
    assert round(ours.trainable_parameters() / 1e6) == 985 and round(copied.trainable_parameters() / 1e6) == 1140


def test_a_kv_head_count_that_does_not_divide_the_heads_is_refused_naming_the_field():
    from pydantic import ValidationError

    from eagle3_core.stages.train.config import DrafterShape

    with pytest.raises(ValidationError, match="train.drafter.num_key_value_heads \\(5\\) must divide"):
        DrafterShape(num_attention_heads=56, num_key_value_heads=5)
