"""What online training says about its inputs: only what exists in its mode (it reads no hidden/)."""

import pytest


def test_online_trainings_aux_layer_error_does_not_ask_to_extract_hidden_again(tiny_run):
    from eagle3_core.errors import InputError
    from eagle3_core.target import TargetConfig
    from eagle3_core.train.sources import check_inputs

    target = TargetConfig(path=str(tiny_run.target), aux_layer_ids=[1, 2, 40])  # past the target's layers

    with pytest.raises(InputError, match="auxiliary layers") as error:
        check_inputs("online-vllm", target, None, tiny_run.vocab, tiny_run.sequences)

    assert "hidden/ again" not in error.value.fix and "--layers" in error.value.fix
