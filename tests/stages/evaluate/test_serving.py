"""What vLLM says it fed the drafter, the CPU sampling rule, and the per-request figures asked of vLLM."""

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.serve import VLLMServer
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages.evaluate.serving import aux_layers_logged, check_temperature, serve_target
from eagle3_core.target.config import TargetConfig
from tests.fixtures.requirements import vllm_source


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


def started_command(monkeypatch, tmp_path, speculative: dict | None) -> list[str]:
    """The command ``serve_target`` would start (the start itself left out)."""
    monkeypatch.setattr(VLLMServer, "start", lambda self: self)
    monkeypatch.setattr(VLLMServer, "stop", lambda self, grace=20.0: None)
    with serve_target(TargetConfig(path=str(tmp_path)), ServeConfig(device="cpu", port=8000), speculative) as server:
        return server.command("python")


def test_the_server_with_the_drafter_is_asked_for_each_answers_verify_steps_and_the_baseline_is_not(
    monkeypatch, tmp_path
):
    with_drafter = started_command(monkeypatch, tmp_path, {"method": "eagle3", "num_speculative_tokens": 3})
    assert with_drafter[with_drafter.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    # vLLM refuses the flag without a --speculative-config (config/vllm.py): the baseline server never gets it
    assert "--per-request-spec-decode-metrics" not in started_command(monkeypatch, tmp_path, None)


def test_the_vllm_that_serving_uses_knows_the_flag_and_its_level():
    assert '"--per-request-spec-decode-metrics",' in vllm_source("engine/arg_utils.py")
    observability = vllm_source("config/observability.py")
    assert 'per_request_spec_decode_metrics: Literal["none", "summary", "detailed"] = "none"' in observability
    assert "--per-request-spec-decode-metrics requires speculative decoding" in vllm_source("config/vllm.py")
