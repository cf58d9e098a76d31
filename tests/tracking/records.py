"""Read tracking backends' own files back: TensorBoard's through its EventAccumulator, W&B's
offline run files through W&B's record protobuf, MLflow's store through MLflow's client.

W&B 0.31 ships no Python reader for its ``run-<id>.wandb`` files (its core is Go), so the framing
is read here: the LevelDB log format W&B writes (a 7-byte header ``:W&B`` + magic + version, then
32 KiB blocks of records, each ``crc32 (4) | length (2) | type (1) | data``, type 1 = whole,
2/3/4 = first/middle/last piece), each record a ``wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK, RECORD_HEADER, FILE_HEADER = 32768, 7, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def tensorboard_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] as TensorBoard shows them (the killed run's purged steps dropped)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _tensor_tags(acc, plugin: str) -> list[str]:
    return [t for t in acc.Tags()["tensors"] if acc.SummaryMetadata(t).plugin_data.plugin_name == plugin]


def tensorboard_texts(log_dir: Path) -> dict[str, str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    acc.Reload()
    return {tag: acc.Tensors(tag)[-1].tensor_proto.string_val[0].decode() for tag in _tensor_tags(acc, "text")}


def tensorboard_layout(log_dir: Path) -> dict[str, dict[str, list[str]]]:
    """The Custom Scalars tab's layout: category -> chart title -> the tags on that one chart."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.custom_scalar import layout_pb2

    acc = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    acc.Reload()
    charts: dict[str, dict[str, list[str]]] = {}
    for tag in _tensor_tags(acc, "custom_scalars"):
        layout = layout_pb2.Layout()
        layout.ParseFromString(acc.Tensors(tag)[-1].tensor_proto.string_val[0])
        for category in layout.category:
            found = charts.setdefault(category.title, {})
            found.update({c.title: list(c.multiline.tag) for c in category.chart})
    return charts


def _chunks(data: bytes):
    assert data[:4] == b":W&B", f"not a W&B run file: {data[:8]!r}"
    pos, pieces = FILE_HEADER, b""
    while pos + RECORD_HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < RECORD_HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + RECORD_HEADER])
        if pos + RECORD_HEADER + length > len(data):  # a killed writer's last record, cut short
            return
        body = data[pos + RECORD_HEADER : pos + RECORD_HEADER + length]
        pos += RECORD_HEADER + length
        if kind == FULL:
            yield body
        elif kind == FIRST:
            pieces = body
        elif kind == MIDDLE:
            pieces += body
        elif kind == LAST:
            yield pieces + body
        else:  # zeros: the end of what was written
            return


def wandb_records(run_file: Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    records = []
    for chunk in _chunks(run_file.read_bytes()):
        record = pb.Record()
        record.ParseFromString(chunk)
        records.append(record)
    return records


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def wandb_run(run_file: Path) -> dict:
    """One offline run file: its run id, config keys, history rows ({key: value} with _step), summary."""
    found = {"id": None, "started": None, "config": {}, "history": [], "summary": {}}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            found["id"] = record.run.run_id
            found["started"] = record.run.start_time.ToNanoseconds()
            found["config"] = {u.key: json.loads(u.value_json) for u in record.run.config.update}
        elif kind == "history":
            found["history"].append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            found["summary"].update({_key(i): json.loads(i.value_json) for i in record.summary.update})
    return found


def wandb_runs(out_dir: Path) -> list[dict]:
    """Every offline run segment under out_dir/wandb, in the order they started."""
    import wandb

    wandb.teardown()  # W&B's service writes the files after run.finish() returns: wait for it to end
    runs = [wandb_run(f) for f in (out_dir / "wandb").glob("offline-run-*/run-*.wandb")]
    # a killed trainer's segment may hold only its file header (W&B buffers): no start time, and first
    return sorted(runs, key=lambda r: r["started"] or 0)
