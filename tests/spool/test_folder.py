"""The spool folder between an extraction engine and the trainer: what one side does never breaks the other."""

import torch

from eagle3_core.contracts.hidden import read_metadata
from eagle3_core.spool.folder import Requests, Spool, Unit, UnitWriter
from tests.spool.helpers import HIDDEN, requests_for


def _requests(tmp_path, run_id: str) -> Requests:
    return requests_for(tmp_path, run_id, [Unit(sample_ids=["a", "b"], parts=["p", "p"], rows=[0, 1], tokens=[3, 2])])


def test_a_new_run_clearing_the_spool_while_the_engine_writes_a_unit_does_not_fail_the_engine(tmp_path, monkeypatch):
    """A restarted trainer clears the spool at once; a standing engine may be mid-way through a unit of
    the run it replaces (its temp file is named unit-*). The engine must finish that write and move on to
    the new run, not die on its vanished temp file."""
    from eagle3_core.states import writer

    spool, refuse = Spool(tmp_path), writer.refuse_non_finite

    def next_run_starts(*args):  # the new trainer's rank 0, between the engine's open and its rename
        spool.clear()
        spool.write_requests(_requests(tmp_path, "second"))
        return refuse(*args)

    monkeypatch.setattr(writer, "refuse_non_finite", next_run_starts)
    states = [(torch.randn(n, 3, HIDDEN), torch.randn(n, HIDDEN)) for n in (3, 2)]
    UnitWriter(spool, _requests(tmp_path, "first"), 0).write([[5, 6, 7], [8, 9]], [[0, 1, 1], [1, 1]], states)
    # the late unit carries the earlier run's id: the new run's readers skip it and its engine replaces it
    assert read_metadata(spool.unit_path(0))["run_id"] == "first"
    assert spool.read_requests().run_id == "second" and not list(tmp_path.glob("*.tmp"))


def test_clearing_removes_units_and_temp_files_that_no_live_process_writes(tmp_path):
    spool = Spool(tmp_path)
    spool.clear()
    spool.unit_path(1).write_bytes(b"unit")
    dead = tmp_path / "unit-00000002.safetensors.999999999-0a0b0c0d.tmp"  # no such pid: a killed engine's
    dead.write_bytes(b"half")
    spool.clear()
    assert not list(tmp_path.glob("unit-*"))
