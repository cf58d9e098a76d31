"""A spool unit is checked like any shard: it carries the blake2b of its tensor bytes, and the
reader checks it and the unit's size before reading. A unit damaged on disk is one error naming
the file, never trained on (a zeroed unit once gave held-out loss 0.0 and acceptance 1.0)."""

import pytest
import torch

from eagle3_core.contracts.hidden import SEAL, read_metadata
from eagle3_core.errors import InputError
from eagle3_core.spool.folder import Spool, UnitWriter
from eagle3_core.stages.train.data import Sample
from eagle3_core.stages.train.online_vllm import SpoolReader, plan_units
from tests.spool.helpers import HIDDEN, requests_for

BATCH = [Sample("a", 3, "p", 0), Sample("b", 2, "p", 1)]


def written_unit(tmp_path):
    """One pinned unit of two samples written by the engine's writer, and a reader begun on it."""
    plan = plan_units([BATCH], [], 256, 0, HIDDEN, budget_bytes=1 << 20)
    requests = requests_for(tmp_path, "r", plan.units)
    spool = Spool(tmp_path / "spool")
    reader = SpoolReader(tmp_path, spool.root, "r", timeout_s=1)
    reader.begin(requests, plan, rank=0)
    states = [(torch.randn(n, 3, HIDDEN), torch.randn(n, HIDDEN)) for n in (3, 2)]
    UnitWriter(spool, requests, 0).write([[5, 6, 7], [8, 9]], [[0, 1, 1], [1, 1]], states)
    return reader, spool.unit_path(0)


def test_a_unit_carries_the_checksum_of_its_bytes_and_reads_when_whole(tmp_path):
    reader, path = written_unit(tmp_path)
    assert len(read_metadata(path)[SEAL]) == 64 and set(read_metadata(path)[SEAL]) != {"0"}
    batch = reader.load(BATCH, 256, torch.float32, "cpu")
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 9, 0]]


def _flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def _zero(path):
    path.write_bytes(b"\0" * path.stat().st_size)


def _cut(path):
    path.write_bytes(path.read_bytes()[:-7])


@pytest.mark.parametrize(
    "damage, why",
    [
        (_flip_last_byte, "its tensor bytes differ from the data_blake2b it was written with"),
        (_zero, "unreadable safetensors header"),
        (_cut, "bytes, its header says"),
    ],
)
def test_a_damaged_unit_fails_in_one_line_naming_the_file(tmp_path, damage, why):
    reader, path = written_unit(tmp_path)
    damage(path)
    with pytest.raises(InputError) as err:
        reader.load(BATCH, 256, torch.float32, "cpu")
    first = str(err.value).splitlines()[0]
    assert first.startswith("damaged spool unit unit-00000000.safetensors: ") and why in first
    assert err.value.path == str(path) and "rerun the train stage" in str(err.value)


def test_a_unit_with_no_checksum_is_refused(tmp_path):
    """A unit from a writer that does not seal (another tool, an older engine) is not trusted."""
    from eagle3_core.states.writer import ShardWriter

    reader, path = written_unit(tmp_path)
    writer = ShardWriter(path, 5, HIDDEN, {"run_id": "r"})
    writer.write(0, torch.zeros(5, 3, HIDDEN), torch.zeros(5, HIDDEN), torch.zeros(5), torch.ones(5))
    writer.close()
    with pytest.raises(InputError, match="carries no data_blake2b"):
        reader.load(BATCH, 256, torch.float32, "cpu")


def test_a_sealed_unit_is_still_a_hidden_shard_to_every_other_reader(tmp_path):
    """The seal lives in the metadata only: the unit is still a hidden/ shard to every other reader."""
    from eagle3_core.contracts.hidden import check_shard

    _, path = written_unit(tmp_path)
    found = check_shard(path)
    assert found["aux_hidden_states"]["shape"] == [5, 3, HIDDEN]
