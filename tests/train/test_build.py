"""The trainer's builders: the target's frozen embedding and vocab go in; an earlier drafter can seed it."""

import pytest
import torch

from eagle3_core.drafter.model import load_target_tensor
from eagle3_core.errors import InputError
from eagle3_core.target import TargetConfig
from eagle3_core.train.build import build_drafter
from eagle3_core.train.inputs import check_inputs


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
