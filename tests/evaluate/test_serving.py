"""What vLLM says it fed the drafter, and the CPU sampling rule."""

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.evaluate.serving import aux_layers_logged, check_temperature
from eagle3_core.serve.config import ServeConfig


def test_the_layers_vllm_logs_are_read_back_with_their_source(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(
        "(Worker pid=1) INFO 11-30 05:52:21 [gpu_model_runner.py:5243] "
        "Using auxiliary layers from speculative config: (1, 2, 3)\n"
    )
    assert aux_layers_logged(log) == {"layer_ids": [1, 2, 3], "source": "speculative config"}
    log.write_text("INFO [eagle3_utils.py:30] Using Eagle3 auxiliary layers from model: (2, 2, 1)\n")
    assert aux_layers_logged(log) == {"layer_ids": [2, 2, 1], "source": "model"}


def test_a_log_without_the_line_says_nothing(tmp_path):
    (tmp_path / "vllm.log").write_text("INFO Starting vLLM server\n")
    assert aux_layers_logged(tmp_path / "vllm.log") is None
    assert aux_layers_logged(None) is None


def test_sampling_is_a_parameter_on_a_gpu_and_refused_on_cpu():
    check_temperature(0.0, ServeConfig(device="cpu"))
    check_temperature(0.8, ServeConfig(device="cuda"))
    with pytest.raises(ConfigError, match="only greedy is measured correctly on CPU"):
        check_temperature(0.8, ServeConfig(device="cpu"))
