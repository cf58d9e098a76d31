"""What extract says when hidden/ cannot fit: a command that works, with the layers given."""

import pytest


def test_extracts_out_of_disk_hint_keeps_the_layers_given(tiny_llama, tmp_path):
    from eagle3_core.errors import StageError
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.target.config import TargetConfig
    from tests.stages.extract.helpers import write_sequences

    write_sequences(tmp_path / "seq", [[10, 20]])
    cfg = ExtractConfig(layers=[1, 3, 4], device="cpu", disk_headroom=1e15)  # no disk is that large

    with pytest.raises(StageError, match="hidden states need") as error:
        run_extract(cfg, TargetConfig(path=str(tiny_llama)), tmp_path / "seq", tmp_path / "hidden")

    assert "eagle3 train --mode online-vllm" in error.value.fix and "--layers 1,3,4" in error.value.fix


def test_a_target_too_large_for_the_transformers_engine_is_one_line_naming_vllm_before_any_load(
    prefect_api, tmp_path, capsys
):
    """A folder whose config.json declares Llama-3-70B's shape and holds no weights: a load would fail
    with transformers' own words; eagle3 sizes it from the config first (282 GB in fp32 on the CPU)."""
    from eagle3_core.states.target_size import target_size
    from tests.cli_helpers import cli_error, error_line
    from tests.stages.extract.helpers import write_sequences
    from tests.states.shapes import config_only_target

    target = config_only_target(tmp_path / "llama-3-70b")
    if target_size(target, "cpu").fits:
        pytest.skip("this machine has over 353 GB free: Llama-3-70B fits it in fp32")
    write_sequences(tmp_path / "seq", [[10, 20]])
    argv = ["extract", "--input", str(tmp_path / "seq"), "--target", str(target), "--out", str(tmp_path / "hidden")]
    err = cli_error([*argv, "--layers", "2,40,77", "--device", "cpu"], capsys)
    line = error_line(err)
    assert line.startswith(
        "error: extract's transformers engine cannot load the target here: the target's 70.6 B parameters "
        "need 282.2 GB in float32 on the CPU"
    ), err
    assert "fix: set extract.engine: vllm (`eagle3 extract --engine vllm`)" in err
    assert not (tmp_path / "hidden" / "manifest.json").exists()  # refused in the plan: nothing written
