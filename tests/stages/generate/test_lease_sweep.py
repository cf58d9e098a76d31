"""The CLI's ephemeral Prefect API sweeps expired slot leases (``tasks/ephemeral_api.py``): its
command is Prefect's with the sweeping app and file leases; a sweep gives back exactly the
expired leases' slots, once, even when two APIs sweep one folder at the same moment. The whole
path (a ``kill -9``'d run's slots back for its rerun) is test_cli's kill test."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from tasks.ephemeral_api import APP, FILESYSTEM_LEASES, LEASE_STORAGE_VARIABLE, sweep


def test_the_clis_ephemeral_api_is_prefects_app_with_file_leases_and_the_sweep(monkeypatch):
    from prefect.server.api import server
    from prefect.server.services.perpetual_services import get_enabled_perpetual_services
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from eagle3_core.serve import process
    from flows.cli import watch_ephemeral_api

    started = {}
    monkeypatch.setattr(process, "WatchedPopen", lambda args, env: started.update(args=args, env=env))
    monkeypatch.setattr(server, "subprocess", server.subprocess)  # put back after: the call swaps it
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv(LEASE_STORAGE_VARIABLE, raising=False)
    monkeypatch.setattr(sys, "argv", ["eagle3", "generate"])

    def start() -> tuple[list[str], dict[str, str]]:
        # no API of the user's, in the environment or the settings (a test session's harness sets one)
        with temporary_settings(restore_defaults={PREFECT_API_URL}), watch_ephemeral_api():
            try:
                server.SubprocessASGIServer(port=1)._run_uvicorn_command()  # what Prefect runs to start it
            finally:
                server.SubprocessASGIServer._instances.pop(1, None)
        return started["args"], started["env"]

    args, env = start()
    assert args[args.index("--factory") + 1] == APP
    assert env[LEASE_STORAGE_VARIABLE] == FILESYSTEM_LEASES
    monkeypatch.setenv(LEASE_STORAGE_VARIABLE, "mine")
    assert start()[1][LEASE_STORAGE_VARIABLE] == "mine"  # a user's choice of lease storage wins
    ephemeral = [config.function.__name__ for config in get_enabled_perpetual_services(ephemeral=True)]
    assert "sweep_expired_leases" in ephemeral


def test_a_sweep_gives_back_the_expired_leases_slots_once(tmp_path, prefect_api):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate, GlobalConcurrencyLimitUpdate
    from prefect.server.concurrency.lease_storage import ConcurrencyLimitLeaseMetadata
    from prefect.server.concurrency.lease_storage.filesystem import ConcurrencyLeaseStorage

    name = f"sweep-test-{tmp_path.name}"
    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=8))
        client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(active_slots=5))
        limit_id = client.read_global_concurrency_limit_by_name(name).id

    async def two_apis_sweep() -> tuple[int, int, object, object]:
        storage = ConcurrencyLeaseStorage(tmp_path / "leases")
        dead = [  # a killed run's: already lapsed
            await storage.create_lease([limit_id], timedelta(seconds=-1), ConcurrencyLimitLeaseMetadata(slots=2))
            for _ in range(2)
        ]
        live = await storage.create_lease([limit_id], timedelta(seconds=60), ConcurrencyLimitLeaseMetadata(slots=1))
        other = ConcurrencyLeaseStorage(tmp_path / "leases")  # another CLI run's API on the same folder
        revoked = await asyncio.gather(sweep(storage), sweep(other))
        return revoked, [await storage.read_lease(lease.id) for lease in dead], await storage.read_lease(live.id)

    revoked, dead_after, live_after = asyncio.run(two_apis_sweep())
    assert sorted(revoked) == [0, 2] and dead_after == [None, None] and live_after is not None
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(name).active_slots == 1  # 5 - 2 - 2, not 0
