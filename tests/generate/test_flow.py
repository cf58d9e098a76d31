"""The generate flow against the test Prefect API: batch tasks, the endpoint limit, artifacts."""

from __future__ import annotations

import pytest

from tests.generate.helpers import accepted, config, prompts, write_jsonl


def test_flow_runs_a_task_per_batch_under_the_endpoint_limit_and_publishes_artifacts(tmp_path, fake_server, prefect_api):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.generate import generate_flow
    from tasks.generate import endpoint_limit_name

    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(25)), [fake_server.url], batch_size=10)
    manifest = generate_flow(cfg, str(tmp_path / "out"))

    assert manifest["counts"]["accepted"] == 25 and len(accepted(tmp_path / "out")) == 25
    name = endpoint_limit_name(fake_server.url)
    assert name == f"vllm:127.0.0.1:{fake_server.port}"
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(name)
        runs = client.read_task_runs()
        keys = {a.key for a in client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["generate-summary", "generate-table", "generate-progress"])))}
    assert limit.limit == cfg.concurrency and limit.active_slots == 0  # created, and released after the run
    batch_runs = [r for r in runs if r.name.startswith("generate-batch-") and r.flow_run_id is not None]
    assert len({r.name for r in batch_runs}) >= 3  # 25 rows / 10 per batch: tasks per batch, not per request
    assert {"generate-summary", "generate-table", "generate-progress"} <= keys


def test_flow_stops_with_the_endpoint_error_when_the_server_never_reasons(tmp_path, make_fake_server, prefect_api):
    from eagle3_core.errors import EndpointError
    from flows.generate import generate_flow

    server = make_fake_server(layout="none")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(3)), [server.url])
    with pytest.raises(EndpointError, match="without reasoning"):
        generate_flow(cfg, str(tmp_path / "out"))
    assert len(server.requests) == 1  # the probe, and nothing after it
