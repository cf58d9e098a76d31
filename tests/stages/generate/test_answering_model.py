"""generate's key holds the model that answers: with `generate.model` unset, the name the endpoint
serves (asked before the skip), so a rerun against a server that now serves another model asks it
again instead of reporting `complete ... skipped` over the other model's rows."""

import time

import pytest

from eagle3_core.errors import EndpointError
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.generate.stage import run_generate
from tests.fixtures.fake_server import FakeServer
from tests.stages.generate.helpers import Recorder, accepted, config, prompts, write_jsonl


@pytest.fixture
def endpoint():
    """Serve one model, then another on the same port, as a restarted server does: ``swap(name)``."""
    servers: list[FakeServer] = []

    def swap(model: str) -> FakeServer:
        port = servers[-1].port if servers else 0
        if servers:
            servers[-1].stop()
        servers.append(FakeServer(model=model, port=port).start())
        return servers[-1]

    yield swap
    servers[-1].stop()


def test_a_rerun_against_an_endpoint_that_now_serves_another_model_asks_it_again(tmp_path, endpoint):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(5)), tmp_path / "out"
    first = endpoint("model-a")
    cfg = config(src, [first.url], return_token_ids=False)  # no --model: the endpoint's own name
    assert cfg.model is None

    ran = run_generate(cfg, out)
    same = run_generate(cfg, out)
    second = endpoint("model-b")
    assert second.url == first.url  # the same endpoint, the same command
    again = run_generate(cfg, out, reporter := Recorder())

    assert ran.status == same.status == again.status == "complete"
    assert same.updated_at == ran.updated_at  # the same model: skipped without a request
    assert again.updated_at != ran.updated_at and not any("skipped" in line for line in reporter.lines)
    assert again.counts["requests"] == 5 and again.counts.get("resumed", 0) == 0 and len(second.requests) == 6
    assert set(accepted(out)["model"]) == {"model-b"} and len(accepted(out)) == 5  # model-a's rows are gone
    assert again.details["model"] == "model-b"


def test_a_rerun_with_nothing_to_do_asks_only_the_model_list(tmp_path, endpoint):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(3)), tmp_path / "out"
    server = endpoint("model-a")
    cfg = config(src, [server.url], return_token_ids=False)
    run_generate(cfg, out)
    chats = len(server.requests)

    started = time.monotonic()
    assert run_generate(cfg, out).counts["requests"] == 3  # the first run's figures: skipped
    assert len(server.requests) == chats  # no probe, no prompt: one GET /models
    assert time.monotonic() - started < 5


def test_with_the_endpoint_down_a_finished_folder_is_left_as_it_is_and_the_error_names_model(tmp_path, endpoint):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(3)), tmp_path / "out"
    server = endpoint("model-a")
    cfg = config(src, [server.url], return_token_ids=False)
    done = run_generate(cfg, out)
    server.stop()

    with pytest.raises(EndpointError) as error:
        run_generate(cfg, out)

    assert "GET /models" in error.value.message and "--model" in error.value.fix
    after = read_manifest(out)
    assert after.status == "complete" and after.updated_at == done.updated_at  # not failed: nothing was learnt
    assert run_generate(cfg.model_copy(update={"model": "model-a"}), out).status == "complete"  # named: no GET
