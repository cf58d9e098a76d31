"""Generate's flow (built from its declaration) against the test Prefect API: one streaming task,
the endpoint limit, artifacts."""

from __future__ import annotations

import pytest

from tests.prefect_reads import artifacts
from tests.stages.generate.helpers import accepted, config, prompts, write_jsonl


def test_flow_streams_every_row_in_one_task_under_the_endpoint_limit_and_publishes_artifacts(
    tmp_path, fake_server, prefect_api
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    from flows.stages import stage_flow
    from tasks.endpoints import endpoint_limit_name

    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(25)), [fake_server.url])
    manifest = stage_flow("generate")(cfg, str(tmp_path / "out"))

    assert manifest.counts["accepted"] == 25 and len(accepted(tmp_path / "out")) == 25
    name = endpoint_limit_name(fake_server.url)
    assert name == f"vllm:127.0.0.1:{fake_server.port}"
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(name)
        runs_counter = client.read_global_concurrency_limit_by_name(f"{name}:runs")
        flow_run = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)[0]
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id])))
    keys = {
        a.key for a in artifacts("generate-summary", "generate-table", "generate-progress", flow_run_id=flow_run.id)
    }
    # created, and every leased slot given back after the run
    assert limit.limit == cfg.concurrency and limit.active_slots == 0 and runs_counter.active_slots == 0
    names = {r.name for r in runs}  # a run is named after its task, plus a suffix
    assert sorted(n.rsplit("-", 1)[0] for n in names) == [
        "generate-finish",
        "generate-plan",
        "generate-release",
        "generate-stream",
    ]
    assert "generate-stream-00000" in names  # the stage's one unit: every row in one task
    assert {"generate-summary", "generate-table", "generate-progress"} <= keys


def test_flow_stops_with_the_endpoint_error_when_the_server_never_reasons(tmp_path, make_fake_server, prefect_api):
    from eagle3_core.errors import EndpointError
    from flows.stages import stage_flow

    server = make_fake_server(layout="none")
    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(3)), [server.url])
    with pytest.raises(EndpointError, match="without reasoning"):
        stage_flow("generate")(cfg, str(tmp_path / "out"))
    assert len(server.requests) == 1  # the probe, and nothing after it


def test_an_interrupt_in_the_stream_task_leaves_a_resumable_running_manifest_and_every_slot_given_back(
    tmp_path, fake_server, prefect_api, monkeypatch
):
    from prefect.client.orchestration import get_client

    from eagle3_core.run.manifest import read_manifest
    from flows.stages import stage_flow
    from tasks.common import PrefectReporter
    from tasks.endpoints import endpoint_limit_name

    cfg = config(write_jsonl(tmp_path / "in.jsonl", prompts(60)), [fake_server.url], shard_rows=5)
    out = tmp_path / "out"

    def ctrl_c_at_20_rows(self, stage, done, total, **figures):  # once, as the terminal delivers it
        if done >= 20:
            monkeypatch.undo()
            raise KeyboardInterrupt

    monkeypatch.setattr(PrefectReporter, "progress", ctrl_c_at_20_rows)
    with pytest.raises(KeyboardInterrupt):
        stage_flow("generate")(cfg, str(out))

    assert read_manifest(out).status == "running"  # not failed: only the user stopped it
    kept = len(accepted(out))
    assert 0 < kept < 60
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(endpoint_limit_name(fake_server.url))
    assert limit.active_slots == 0  # the stage's close gave its leases back

    manifest = stage_flow("generate")(cfg, str(out))  # the folder's lock was let go
    assert manifest.status == "complete" and manifest.counts["resumed"] >= kept
    assert accepted(out)["sample_id"].n_unique() == 60 == len(accepted(out))
