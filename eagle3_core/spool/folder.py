"""The spool: a folder with a byte budget between a hidden-state engine and the trainer.

The trainer (consumer) writes what it will read, in the order it will read it; the producer
runs an extraction engine (``vllm_engine`` or ``hf_engine``) over those samples and writes
each unit's states; the trainer deletes a unit once read unless it is pinned. Layout:

    requests.json                 run id, target, layers, width, budget, units (sample refs)
    unit-00000042.safetensors     unit 42's states, the hidden/ shard layout (``contracts.hidden``),
                                  samples in request order, renamed into place when whole
    producer.json                 state (loading/waiting/running/full/done/failed), units written,
                                  tokens, engine seconds, peak bytes, heartbeat

Guarantees:
- Disk: unit files never exceed ``budget_bytes``. Before writing a unit the producer waits until
  the files present plus the new unit fit (``Requests.check`` refuses a budget that could
  deadlock: pinned units + (ranks + 1) of the largest unit must fit).
- Memory: the producer holds one unit's states (a unit is one micro-batch, at most
  ``micro_batch_tokens`` tokens); samples are cut to the trainer's token budget before the
  forward pass (causal attention: the states of the kept prefix do not change).
- Order: units are written in request order, so a consumer that reads in that order waits only
  for the engine, never for a unit written later.
- Integrity: a unit carries the blake2b of its tensor bytes in its header (``contracts.hidden.SEAL``);
  the reader checks it and the unit's size before reading (``check_unit``), so a unit cut short or
  changed on disk is one error naming the file, never trained on.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from pydantic import Field

from eagle3_core.base import StrictModel
from eagle3_core.contracts.hidden import FORMAT, SEAL, UNSEALED, token_bytes
from eagle3_core.errors import ConfigError, InputError, StageError
from eagle3_core.run.fsio import atomic_path, read_json, stray_temps, write_json_atomic

REQUESTS = "requests.json"
STATUS = "producer.json"
HEADER_SLACK = 4096  # a unit's safetensors header (shapes + metadata) stays under this
POLL_S = 0.05


def unit_name(index: int) -> str:
    return f"unit-{index:08d}.safetensors"


def unit_bytes(tokens: int, hidden_size: int) -> int:
    """A unit file's size, at most: 3 aux + 1 final state in bf16, int32 id, uint8 mask per token."""
    return tokens * token_bytes(hidden_size) + HEADER_SLACK


class Unit(StrictModel):
    """The samples of one unit, in the order their states are stored."""

    sample_ids: list[str] = Field(description="Sample ids.")
    parts: list[str] = Field(description="Sequences file of each sample (inside sequences_dir).")
    rows: list[int] = Field(description="Row of each sample in its file.")
    tokens: list[int] = Field(description="Tokens kept of each sample (cut to the trainer's budget).")
    pinned: bool = Field(
        False, description="Kept for the whole run (held-out set, or every unit when the dataset fits)."
    )


class Requests(StrictModel):
    """What the consumer will read, in order; written once per run by the trainer."""

    run_id: str = Field(description="Changes with every trainer start; a producer serves the newest.")
    sequences_dir: str = Field(description="sequences/ folder the samples come from.")
    target_path: str = Field(description="The target model directory (a producer refuses another).")
    layers: list[int] = Field(description="Auxiliary layer ids, vLLM counting.")
    num_hidden_layers: int = Field(description="Target decoder layers N.")
    hidden_size: int = Field(description="Target hidden size H.")
    budget_bytes: int = Field(description="Unit files never exceed this many bytes.")
    consumers: int = Field(1, description="Ranks reading at once (each may hold one unit).")
    units: list[Unit] = Field(description="Units in the order they are read.")

    def unit_size(self, index: int) -> int:
        return unit_bytes(sum(self.units[index].tokens), self.hidden_size)

    def check(self) -> None:
        """Refuse a budget that cannot hold the pinned units plus one unit per rank and one more."""
        pinned = sum(self.unit_size(i) for i, u in enumerate(self.units) if u.pinned)
        largest = max((self.unit_size(i) for i, u in enumerate(self.units) if not u.pinned), default=0)
        need = pinned + (self.consumers + 1) * largest
        if need > self.budget_bytes:
            raise ConfigError(
                f"the spool budget ({gib(self.budget_bytes)} GiB) cannot hold the held-out "
                f"states ({gib(pinned)} GiB) plus {self.consumers + 1} micro-batches "
                f"({gib(largest)} GiB each)",
                fix=f"raise train.online_vllm.spool_gb to at least {gib_up(need)}, "
                "or lower train.micro_batch_tokens / train.heldout_fraction",
            )


def gib(n: int) -> str:
    """``n`` bytes in GiB to 3 significant digits: a budget of 0.01 reads 0.01, never 0.00."""
    return f"{n / 2**30:.3g}"


def gib_up(n: int) -> str:
    """The smallest 3-significant-digit GiB figure that holds ``n`` bytes (a rounded-down figure
    would name a budget that is still too small)."""
    figure = float(gib(n))
    while figure * 2**30 < n:
        figure = float(f"{figure * 1.001 + 1e-12:.3g}")
    return f"{figure:g}"


class Spool:
    """The spool folder; both sides use it, each for its own files."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def unit_path(self, index: int) -> Path:
        return self.root / unit_name(index)

    def clear(self, status: bool = False) -> None:
        """Remove every unit and the requests of an earlier run (a new run recomputes what it reads);
        the producer's status too when ``status`` (only the producer's owner may). A unit still being
        written stays: its unit file carries the old run id, which readers skip and the new run overwrites."""
        names = (REQUESTS, STATUS) if status else (REQUESTS,)
        if self.root.exists():
            dead = set(stray_temps(self.root))
            for path in self.root.iterdir():
                if path.name.endswith(".tmp") and path not in dead:
                    continue  # a standing engine still writing the replaced run's unit: it renames it itself
                if path.name.startswith("unit-") or path.name in names:
                    path.unlink(missing_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)

    def write_requests(self, requests: Requests) -> None:
        write_json_atomic(self.root / REQUESTS, requests.model_dump(mode="json"))

    def read_requests(self) -> Requests | None:
        path = self.root / REQUESTS
        return Requests.model_validate(read_json(path)) if path.exists() else None

    def used_bytes(self) -> int:
        """Bytes of unit files on disk, half-written ones included."""
        total = 0
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.name.startswith("unit-"):
                    try:
                        total += entry.stat().st_size
                    except FileNotFoundError:  # deleted by the consumer meanwhile
                        continue
        return total

    def status(self) -> dict:
        path = self.root / STATUS
        try:
            return read_json(path) if path.exists() else {}
        except (OSError, ValueError):  # replaced while read: ask again next poll
            return {}


class SpoolFeeder:
    """A daemon thread that fills the spool for one training run (``_run``): on entry the spool is
    cleared, the producer's status with it, and the thread started; on exit it is told to stop
    (``stop``) and joined. ``error`` keeps what ended it, for the stage (the trainer reads
    producer.json)."""

    def __init__(self, spool_dir: str | Path, name: str) -> None:
        self.spool = Spool(spool_dir)
        self.stop, self.error = threading.Event(), None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self.spool.clear(status=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


class UnitWriter:
    """Writes one unit's samples (states from an engine) into a unit file, atomically."""

    def __init__(self, spool: Spool, requests: Requests, index: int) -> None:
        self.spool, self.requests, self.index = spool, requests, index

    def write(self, ids: list[list[int]], masks: list[list[int]], states: list) -> int:
        import torch

        from eagle3_core.states.writer import ShardWriter, refuse_non_finite, seal

        unit, tokens = self.requests.units[self.index], sum(len(x) for x in ids)
        meta = {"run_id": self.requests.run_id, "unit": str(self.index), "format": FORMAT, SEAL: UNSEALED}
        path = self.spool.unit_path(self.index)
        with atomic_path(path) as tmp:
            writer = ShardWriter(tmp, tokens, self.requests.hidden_size, meta)
            try:
                offset = 0
                for sample_id, sample_ids, mask, (aux, final) in zip(unit.sample_ids, ids, masks, states, strict=True):
                    refuse_non_finite(aux, final, sample_id, path)
                    writer.write(
                        offset,
                        aux,
                        final,
                        torch.tensor(sample_ids, dtype=torch.int32),
                        torch.tensor(mask, dtype=torch.uint8),
                    )
                    offset += len(sample_ids)
            finally:
                writer.close()
            seal(tmp)  # the reader checks the bytes against it (a unit damaged on disk is named, never trained on)
            size = tmp.stat().st_size  # once renamed, the trainer may read and delete it at any moment
        return size


def check_unit(path: Path) -> None:
    """A unit about to be read is whole and holds the bytes it was written with (its seal), else one
    ``InputError`` naming the file. Costs one hashing pass over the unit (blake2b, ~330 MiB/s on one
    core of this 2-core machine, ~1 GB/s on a server core), once per unit and run."""
    from eagle3_core.contracts.header import read_header
    from eagle3_core.contracts.hidden import layout_problem, seal_problem

    try:
        found, length = read_header(path)
    except (OSError, ValueError) as exc:
        raise unit_damaged(path, f"unreadable safetensors header ({exc})") from None
    found["__header_bytes__"] = length
    problem = layout_problem(found, path.stat().st_size) or seal_problem(found, path)
    if problem:
        raise unit_damaged(path, problem)


def unit_damaged(path: Path, why: str) -> InputError:
    return InputError(
        f"damaged spool unit {path.name}: {why}",
        path=str(path),
        fix="rerun the train stage: a new run clears the spool and the engine recomputes every unit "
        f"(and find what else writes into {path.parent})",
    )


class StatusFile:
    """producer.json, rewritten atomically by the producer loop and a heartbeat thread."""

    HEARTBEAT_S = 5.0

    def __init__(self, spool: Spool, run_id: str) -> None:
        self.spool, self._lock = spool, threading.Lock()
        self.record: dict = {
            "run_id": run_id,
            "state": "starting",
            "units": 0,
            "tokens": 0,
            "peak_bytes": 0,
            "forward_s": 0.0,
            "room_wait_s": 0.0,
            "startup_s": None,
            "error": None,
        }

    def update(self, **fields) -> None:
        with self._lock:
            self.record.update(fields, heartbeat=time.time())
            write_json_atomic(self.spool.root / STATUS, self.record)

    def beat_until(self, stop: threading.Event) -> threading.Thread:
        """A daemon thread that rewrites the heartbeat while the engine loads or computes."""

        def beat() -> None:
            while not stop.wait(self.HEARTBEAT_S):
                self.update()

        thread = threading.Thread(target=beat, name="eagle3-spool-heartbeat", daemon=True)
        thread.start()
        return thread


def wait_for_room(spool: Spool, need: int, budget: int, stop: threading.Event) -> tuple[float, int]:
    """Block until ``need`` more bytes fit the budget; (seconds waited, bytes used before writing)."""
    started = time.monotonic()
    while True:
        used = spool.used_bytes()
        if used + need <= budget:
            return time.monotonic() - started, used
        if stop.wait(POLL_S):
            raise Stopped()


class Stopped(Exception):
    """The producer was asked to stop (the run ended or a new one began)."""


class RowSource:
    """Token ids and loss masks of requested samples, read from sequences/ parts.

    Units mix samples of many parts (the trainer shuffles), so the last few parts read stay
    open: ids are 4 bytes a token against the states' 8·H + 5 (57 KiB at H = 7168), so even
    whole parts cost little beside one unit of states.
    """

    KEEP_PARTS = 8

    def __init__(self, sequences_dir: str | Path) -> None:
        self.root, self._tables = Path(sequences_dir), {}

    def _table(self, part: str):
        from eagle3_core.contracts import sequences

        if part not in self._tables:
            if len(self._tables) >= self.KEEP_PARTS:
                self._tables.pop(next(iter(self._tables)))
            self._tables[part] = sequences.read(self.root / part, ["sample_id", "input_ids", "loss_mask"])
        return self._tables[part]

    def rows(self, unit: Unit) -> tuple[list[list[int]], list[list[int]]]:
        """(input ids, loss masks) of the unit's samples, cut to the requested token counts."""
        ids: list[list[int]] = []
        masks: list[list[int]] = []
        for sample_id, part, row, keep in zip(unit.sample_ids, unit.parts, unit.rows, unit.tokens, strict=True):
            found = self._table(part).slice(row, 1).to_pydict()
            if found["sample_id"][0] != sample_id:
                raise StageError(
                    f"sequences/ changed under the run: row {row} of {part} is {found['sample_id'][0]}",
                    sample_id=sample_id,
                    path=str(self.root / part),
                    fix="restart the train stage",
                )
            ids.append(found["input_ids"][0][:keep])
            masks.append(found["loss_mask"][0][:keep])
        return ids, masks


def produce(spool: Spool, requests: Requests, engine, status: StatusFile, stop: threading.Event) -> None:
    """Write every requested unit in order, each once there is room; returns when all are written."""
    status.update(state="running")
    source = RowSource(requests.sequences_dir)
    for index, unit in enumerate(requests.units):
        if stop.is_set():
            raise Stopped()
        need = requests.unit_size(index)
        if spool.used_bytes() + need > requests.budget_bytes:
            status.update(state="full")  # waiting for the trainer to read and delete units
        waited, used = wait_for_room(spool, need, requests.budget_bytes, stop)
        ids, masks = source.rows(unit)
        started = time.monotonic()
        states = forward(engine, ids)
        seconds = time.monotonic() - started
        size = UnitWriter(spool, requests, index).write(ids, masks, states)
        record = status.record
        status.update(
            state="running",
            units=index + 1,
            tokens=record["tokens"] + sum(len(x) for x in ids),
            forward_s=round(record["forward_s"] + seconds, 3),
            room_wait_s=round(record["room_wait_s"] + waited, 3),
            peak_bytes=max(record["peak_bytes"], used + size),
        )
    status.update(state="done")


def forward(engine, ids: list[list[int]]) -> list:
    """States of every sample, in order, batched as the engine plans (vLLM: one request list)."""
    states: list = [None] * len(ids)
    for batch in engine.plan([len(x) for x in ids]):
        for i, pair in zip(batch.members, engine.forward([ids[i] for i in batch.members]), strict=True):
            states[i] = pair
    return states
