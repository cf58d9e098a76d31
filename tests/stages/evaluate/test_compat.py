"""A drafter trained for another target is refused, with a message that says what differs."""

import json
import shutil

import pytest

from eagle3_core.errors import InputError
from eagle3_core.stages.evaluate.compat import check_drafter
from tests.stages.evaluate.models import make_export, make_target


def test_a_matching_drafter_passes_and_reports_its_layers(tiny_target, random_export):
    info = check_drafter(random_export, tiny_target)
    assert info.aux_layer_ids == [1, 2, 3]
    assert (info.hidden_size, info.vocab_size, info.draft_vocab_size) == (64, 96, 48)


def test_a_drafter_for_a_wider_target_is_refused_naming_the_hidden_size(tmp_path, tiny_target):
    wide = make_target(tmp_path / "wide", hidden_size=128, num_attention_heads=4)
    export = make_export(tmp_path / "export", wide)
    with pytest.raises(InputError, match="different target: hidden size is 128 in the drafter but 64 in the target"):
        check_drafter(export, tiny_target)


def test_a_drafter_for_another_vocabulary_is_refused(tmp_path, tiny_target):
    other = make_target(tmp_path / "other", vocab_size=120)
    export = make_export(tmp_path / "export", other)
    with pytest.raises(InputError, match="vocab size is 120 in the drafter but 96"):
        check_drafter(export, tiny_target)


def test_a_drafter_without_aux_layer_ids_is_refused(tmp_path, tiny_target, random_export):
    export = shutil.copytree(random_export, tmp_path / "export")
    config = json.loads((export / "config.json").read_text())
    del config["eagle_aux_hidden_state_layer_ids"]
    (export / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="names 0 auxiliary layers") as err:
        check_drafter(export, tiny_target)
    assert "vLLM picks its own layers" in str(err.value)


def test_aux_layer_ids_beyond_the_target_are_refused(tmp_path, tiny_target):
    export = make_export(tmp_path / "export", tiny_target, aux=(2, 3, 9))
    with pytest.raises(InputError, match="target has 4 layers"):
        check_drafter(export, tiny_target)


def test_a_folder_that_is_not_an_export_is_refused(tiny_target):
    with pytest.raises(InputError, match="does not declare LlamaForCausalLMEagle3"):
        check_drafter(tiny_target, tiny_target)


def test_a_full_vocabulary_drafter_passes_without_d2t(tmp_path, tiny_target):
    """The export ships no d2t/t2d when the draft vocab is the whole vocabulary (vLLM maps nothing)."""
    import torch

    from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter

    config = DrafterConfig.from_target(json.loads((tiny_target / "config.json").read_text()), 96, [1, 2, 3])
    torch.manual_seed(0)
    Eagle3Drafter(config).save_export(tmp_path / "export")
    info = check_drafter(tmp_path / "export", tiny_target)
    assert (info.vocab_size, info.draft_vocab_size) == (96, 96)
