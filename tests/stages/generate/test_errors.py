"""User mistakes stop the stage before any work, with an error that names the problem and the fix."""

import pytest

from eagle3_core.errors import ConfigError, EndpointError, InputError
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import config, prompts, write_jsonl


def test_a_dataset_that_does_not_exist_is_an_input_error(tmp_path, fake_server):
    with pytest.raises(InputError, match="cannot load dataset 'nobody/nothing'") as info:
        run_generate(config("nobody/nothing", [fake_server.url]), tmp_path / "out")
    assert info.value.fix


def test_a_missing_local_file_is_an_input_error(tmp_path, fake_server):
    with pytest.raises(InputError, match="input not found"):
        run_generate(config(tmp_path / "missing.jsonl", [fake_server.url]), tmp_path / "out")


def test_an_unreachable_endpoint_stops_before_any_row(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(2))
    with pytest.raises(EndpointError, match="cannot reach http://127.0.0.1:9/v1/models"):
        run_generate(config(src, ["http://127.0.0.1:9/v1"]), tmp_path / "out")
    assert not (tmp_path / "out" / "accepted").exists()


def test_a_server_that_never_reasons_is_refused_at_the_probe(tmp_path, make_fake_server):
    server = make_fake_server(layout="none")
    with pytest.raises(EndpointError, match="without reasoning") as info:
        run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(2)), [server.url]), tmp_path / "out")
    assert "--reasoning-parser" in info.value.fix and "--allow-empty-reasoning" in info.value.fix
    assert len(server.requests) == 1


def test_a_model_the_server_does_not_serve_is_named(tmp_path, fake_server):
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(1)), [fake_server.url], model="other")
    with pytest.raises(EndpointError, match="does not serve model 'other'"):
        run_generate(cfg, tmp_path / "out")


def test_no_endpoint_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="at least one endpoint"):
        run_generate(config(write_jsonl(tmp_path / "in.jsonl", prompts(1)), []), tmp_path / "out")


def test_a_complete_run_is_reused_without_any_endpoint(tmp_path, fake_server):
    from eagle3_core.run.driver import StageRun
    from eagle3_core.stages.generate.stage import GenerateStage

    source = write_jsonl(tmp_path / "in.jsonl", prompts(3))
    first = run_generate(config(source, [fake_server.url]), tmp_path / "out")
    sent = len(fake_server.requests)
    offline = config(source, [], model="fake-model")  # named, the model that answers is known without asking
    assert StageRun(GenerateStage(offline, tmp_path / "out")).life.would_skip()  # the pipeline's question
    assert run_generate(offline, tmp_path / "out").counts == first.counts
    assert len(fake_server.requests) == sent
