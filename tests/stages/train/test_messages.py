"""What online training says about its inputs: only what exists in its mode (it reads no hidden/)."""

import pytest


def test_online_trainings_aux_layer_error_does_not_ask_to_extract_hidden_again(tiny_run):
    from eagle3_core.errors import InputError
    from eagle3_core.stages.train.hidden_sources import check_inputs
    from eagle3_core.target.config import TargetConfig

    target = TargetConfig(path=str(tiny_run.target), aux_layer_ids=[1, 2, 40])  # past the target's layers

    with pytest.raises(InputError, match="auxiliary layers") as error:
        check_inputs("online-vllm", target, None, tiny_run.vocab, tiny_run.sequences)

    assert "hidden/ again" not in error.value.fix and "--layers" in error.value.fix


def test_online_training_on_a_target_too_large_is_one_line_naming_online_vllm_before_the_trainer_starts(tmp_path):
    """A folder whose config.json declares Llama-3-70B's shape and holds no weights: the trainer's reader
    would load it whole (282 GB in fp32 on the CPU); the stage refuses in its plan, so neither the
    trainer nor a load starts and the drafter folder is not written."""
    from eagle3_core.errors import ConfigError
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.stage import run_train
    from eagle3_core.states.target_size import target_size
    from eagle3_core.target.config import TargetConfig
    from tests.stages.extract.helpers import write_sequences
    from tests.stages.train.builders import build_vocab
    from tests.states.shapes import config_only_target

    target = config_only_target(tmp_path / "llama-3-70b")
    if target_size(target, "cpu").fits:
        pytest.skip("this machine has over 353 GB free: Llama-3-70B fits it in fp32")
    sequences = tmp_path / "sequences"
    write_sequences(sequences, [[12, 20, 9]])
    vocab = build_vocab(sequences, tmp_path / "vocab", vocab_size=128256)
    with pytest.raises(ConfigError) as error:
        run_train(
            TrainConfig(mode="online", max_steps=1),
            TargetConfig(path=str(target), aux_layer_ids=[2, 40, 77]),
            None,
            vocab,
            tmp_path / "drafter",
            sequences_dir=sequences,
        )
    assert error.value.message.startswith(
        "online training's reader (train.mode: online) cannot load the target here: the target's 70.6 B "
        "parameters need 282.2 GB in float32 on the CPU"
    )
    assert error.value.fix.startswith("set train.mode: online-vllm (`eagle3 train --mode online-vllm`)")
    assert not (tmp_path / "drafter" / "manifest.json").exists()
