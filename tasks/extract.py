"""The extract stage's own artifact: tokens, padding and speed per shard (``extract-shards``).

Its units (one Prefect task per shard) hold the host's GPU limit, ``gpu:{hostname}`` with one
slot (declared in ``eagle3_core.stages``), so two runs on one machine take turns with its
accelerator instead of running out of memory together.
"""

from __future__ import annotations

import socket

from eagle3_core.run.manifest import StageManifest
from eagle3_core.stages.extract.stage import ExtractStage
from tasks.common import publish_table


def gpu_limit_name(host: str | None = None) -> str:
    """The global concurrency limit of one machine's accelerators: ``gpu:{hostname}``."""
    return f"gpu:{host or socket.gethostname()}"


def publish(stage: ExtractStage, manifest: StageManifest) -> None:
    if stage.rows:
        publish_table(stage.rows, key="extract-shards", description="extract: tokens, padding and speed per shard")
