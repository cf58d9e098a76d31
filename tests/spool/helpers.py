"""Requests for units written by hand (no engine, no target): the tiny target's shape."""

from eagle3_core.spool.folder import Requests, Unit

HIDDEN = 64


def requests_for(tmp_path, run_id: str, units: list[Unit]) -> Requests:
    return Requests(
        run_id=run_id,
        sequences_dir=str(tmp_path),
        target_path="t",
        layers=[1, 2, 3],
        num_hidden_layers=4,
        hidden_size=HIDDEN,
        budget_bytes=1 << 20,
        units=units,
    )
