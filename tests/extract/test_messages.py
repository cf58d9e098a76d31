"""What extract says when hidden/ cannot fit: a command that works, with the layers given."""

import pytest


def test_extracts_out_of_disk_hint_keeps_the_layers_given(tiny_llama, tmp_path):
    from eagle3_core.errors import StageError
    from eagle3_core.extract.config import ExtractConfig
    from eagle3_core.extract.stage import run_extract
    from eagle3_core.target import TargetConfig
    from tests.extract.helpers import write_sequences

    write_sequences(tmp_path / "seq", [[10, 20]])
    cfg = ExtractConfig(layers=[1, 3, 4], device="cpu", disk_headroom=1e15)  # no disk is that large

    with pytest.raises(StageError, match="hidden states need") as error:
        run_extract(cfg, TargetConfig(path=str(tiny_llama)), tmp_path / "seq", tmp_path / "hidden")

    assert "eagle3 train --mode online-vllm" in error.value.fix and "--layers 1,3,4" in error.value.fix
