"""The target's memory from its config.json alone, against real models' parameter counts."""

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.states.target_size import TargetSize, check_target_fits, count_parameters, target_size
from tests.states.shapes import LLAMA3_8B, LLAMA3_70B, PARAMETERS, config_only_target


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_the_estimate_is_the_models_own_parameter_count(name):
    config, parameters = PARAMETERS[name]
    assert count_parameters(config) == pytest.approx(parameters, rel=1e-6)


def test_tied_embeddings_count_once():
    untied = count_parameters(LLAMA3_8B)
    assert count_parameters({**LLAMA3_8B, "tie_word_embeddings": True}) == untied - 128256 * 4096


def test_a_config_without_its_shape_gives_no_estimate_and_refuses_nothing(tmp_path):
    folder = config_only_target(tmp_path / "m", {"architectures": ["SomethingNew"], "hidden_size": 64})
    size = target_size(folder, "cpu")
    assert size.parameters is None and size.fits


def test_the_need_is_parameters_times_the_dtypes_bytes_against_80_percent_of_what_is_free():
    gb = 10**9
    assert TargetSize(8 * gb, "bfloat16", "cuda", free=20 * gb).fits  # 16 GB <= 0.8 x 20
    assert not TargetSize(8 * gb, "float32", "cpu", free=39 * gb).fits  # 32 GB > 0.8 x 39
    assert TargetSize(8 * gb, "float32", "cpu", free=None).fits  # free memory unknown: nothing refused


def test_llama_3_70b_in_fp32_is_one_error_naming_the_alternative(tmp_path):
    folder = config_only_target(tmp_path / "llama-70b", LLAMA3_70B)
    assert target_size(folder, "cpu").need == 70_553_706_496 * 4
    if target_size(folder, "cpu").fits:
        pytest.skip("this machine has over 350 GB free: Llama-3-70B in fp32 fits it")
    with pytest.raises(ConfigError) as err:
        check_target_fits(folder, "cpu", None, what="the stage", fix="use the other engine")
    assert err.value.message.startswith(
        "the stage cannot load the target here: the target's 70.6 B parameters need 282.2 GB in float32 on the CPU, "
        "which has "
    )
    assert err.value.fix == "use the other engine" and err.value.path == str(folder)
