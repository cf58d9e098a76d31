"""The CLI's ephemeral Prefect API: Prefect's own, plus the lease sweep it runs only in ``prefect server``.

Without ``PREFECT_API_URL`` a flow run starts Prefect's ephemeral API, a server process of its own
on the ``PREFECT_HOME`` database. Left as Prefect makes it, it keeps concurrency leases in its
memory and runs no repossessor (the service that gives an expired lease's slots back), so the
slots a ``kill -9``'d run had leased of an endpoint's limit stayed taken in the database for good,
and the next run waited on them forever (issue 33). The CLI starts it from ``create_app`` here
instead (``flows.cli.watch_ephemeral_api``), with:

- Prefect's filesystem lease storage (``PREFECT_HOME/concurrency_leases``), so the next run's API,
  a new process, still has the dead run's leases (unless the user chose a lease storage);
- ``sweep_expired_leases`` every ``SWEEP_SECONDS``, from the API's start: each expired lease is
  revoked by the repossessor's own ``revoke_expired_lease`` (its slots given back, its file
  removed), under a file lock, since every CLI run on one ``PREFECT_HOME`` starts its own API and
  two sweeps of one lease would give its slots back twice.

So a killed run's slots are free ``limit_lease_seconds + SWEEP_SECONDS`` after its last renewal
at the latest, once any CLI run's API is up. A ``prefect server`` needs none of this: its
repossessor (``PREFECT_SERVER_SERVICES_REPOSSESSOR_ENABLED``, on by default) sweeps every 15 s
(``..._LOOP_SECONDS``), and its leases live as long as it does.
"""

from __future__ import annotations

from datetime import timedelta

from docket import Perpetual
from prefect.server.services.perpetual_services import perpetual_service
from prefect.settings.context import get_current_settings

PREFECT_APP = "prefect.server.api.server:create_app"  # the uvicorn factory Prefect's ephemeral API runs
APP = "tasks.ephemeral_api:create_app"
LEASE_STORAGE_VARIABLE = "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE"
FILESYSTEM_LEASES = "prefect.server.concurrency.lease_storage.filesystem"
SWEEP_SECONDS = 5.0  # one read of a small index file: cheap, and 5 s on top of a 60 s lease
LOCK_NAME = "eagle3-sweep.lock"
EVERY_SWEEP = Perpetual(automatic=True, every=timedelta(seconds=SWEEP_SECONDS))  # docket's schedule, from the start


def ephemeral_command(args: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Prefect's command and environment for its ephemeral API, made this module's."""
    if PREFECT_APP not in args:
        raise RuntimeError(
            f"Prefect's ephemeral API no longer runs {PREFECT_APP} (a Prefect upgrade): "
            "tasks/ephemeral_api.py must follow it, or a killed run's slots would never come back"
        )
    return [APP if arg == PREFECT_APP else arg for arg in args], {LEASE_STORAGE_VARIABLE: FILESYSTEM_LEASES} | env


def create_app():
    """The uvicorn factory: Prefect's app; importing this module registered the sweep."""
    from prefect.server.api.server import create_app as prefect_app

    return prefect_app()


@perpetual_service(
    enabled_getter=lambda: get_current_settings().server.services.repossessor.enabled,
    run_in_ephemeral=True,
)
async def sweep_expired_leases(
    perpetual: Perpetual = EVERY_SWEEP,
) -> None:
    """Give back the slots of every expired lease (a killed run's), as ``prefect server`` does."""
    from prefect.server.concurrency.lease_storage import get_concurrency_lease_storage

    await sweep(get_concurrency_lease_storage())


async def sweep(storage) -> int:
    """Revoke ``storage``'s expired leases, under its folder's lock; how many were revoked. A
    storage without a folder (Prefect's in-memory one, where a user chose it) holds no lease of a
    dead process: nothing to do."""
    from prefect.locking._filelock import FileLock
    from prefect.server.database import provide_database_interface
    from prefect.server.services.repossessor import revoke_expired_lease

    folder = getattr(storage, "storage_path", None)
    if folder is None:
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / LOCK_NAME)
    await lock.aacquire()
    try:  # the scan under the lock too: another API's sweep may be revoking what it would report
        expired = await storage.read_expired_lease_ids()
        for lease_id in expired:  # re-read there: a lease renewed since the scan is kept
            await revoke_expired_lease(lease_id, db=provide_database_interface(), lease_storage=storage)
    finally:
        lock.release()
    return len(expired)
