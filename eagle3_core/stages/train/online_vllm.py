"""train.mode online-vllm: each micro-batch's states come from an extraction engine through a spool.

Two sides of one folder (``eagle3_core.spool.folder``):

- the trainer (``SpoolReader``) plans what it will read from the seed's batch plan, from the
  micro-batch it resumes at to the last, writes that as the spool's requests, then reads unit
  after unit, deleting each once read unless it is pinned;
- the engine (``online_engine.EngineProducer``, started by the stage for one run, or
  ``online_engine.serve`` standing behind an endpoint folder) computes the units in that order,
  waiting while the spool is full.

Hybrid: when the states of every sample still to be read fit the budget, each sample is computed
once (a unit holds the samples a batch reads first) and kept, so later epochs reuse them;
otherwise the samples that fit beside room for the streamed batches are kept, and each batch's
others form a unit of their own, deleted once read, recomputed every epoch.
``SpoolPlan.describe`` states which, and the recompute cost, in the log and manifest.

Determinism: the batches are the trainer's ``BatchPlan`` over the samples in sample-id order,
the plan the offline reader gets too, so a seed gives the same batches in the same order from
disk or from the engine; a resumed run requests only the micro-batches from its checkpoint on.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import torch

from eagle3_core.errors import StageError
from eagle3_core.spool.folder import HEADER_SLACK, POLL_S, Requests, Spool, Unit, check_unit, unit_bytes
from eagle3_core.stages.train.data import Reader, Sample, collate, on_device, plan_batches, slice_rows

STATUS_EVERY_S = 1.0
OPEN_UNITS = 16  # safetensors mappings kept open (a batch of the reuse plan touches a few units)


def unit_of(samples: list[Sample], budget: int, pinned: bool) -> Unit:
    return Unit(
        sample_ids=[s.sample_id for s in samples],
        parts=[s.where for s in samples],
        rows=[s.offset for s in samples],
        tokens=[min(s.length, budget) for s in samples],
        pinned=pinned,
    )


@dataclass
class SpoolPlan:
    """The units to request and what they cost: reuse or recompute, in tokens and bytes."""

    units: list[Unit]
    reuse: bool
    unique_tokens: int  # tokens of the distinct samples still to be read
    computed_tokens: int  # tokens the engine computes for this run
    states_bytes: int  # spool bytes that would keep every distinct sample's states
    budget_bytes: int
    batch_of: dict[int, int] = field(default_factory=dict)  # streamed unit -> its batch's place in ``batches``

    def describe(self) -> str:
        gib = 2**30
        head = (
            f"spool: {len(self.units)} units; the states still to read take {self.states_bytes / gib:.2f} GiB "
            f"against a budget of {self.budget_bytes / gib:.2f} GiB: "
        )
        if self.reuse:
            return head + f"each sample is computed once and reused by later epochs ({self.unique_tokens:,} tokens)"
        extra = self.computed_tokens - self.unique_tokens
        return head + (
            f"the samples that fit are kept and reused ({self.kept_tokens:,} tokens), the others "
            f"recomputed each epoch: the engine computes {self.computed_tokens:,} tokens for "
            f"{self.unique_tokens:,} distinct ones ({extra:,} recomputed, "
            f"{self.computed_tokens / max(self.unique_tokens, 1):.2f}x); "
            f"spool_gb >= {self.states_bytes / gib:.2f} would compute each once"
        )

    @property
    def kept_tokens(self) -> int:
        return sum(sum(u.tokens) for u in self.units if u.pinned)

    def figures(self) -> dict:
        return {
            "units": len(self.units),
            "reuse": self.reuse,
            "unique_tokens": self.unique_tokens,
            "computed_tokens": self.computed_tokens,
            "recomputed_tokens": self.computed_tokens - self.unique_tokens,
            "kept_tokens": self.kept_tokens,
            "states_bytes": self.states_bytes,
            "budget_bytes": self.budget_bytes,
        }


def plan_units(
    batches: list[list[Sample]],
    heldout: list[Sample],
    budget: int,
    seed: int,
    hidden_size: int,
    budget_bytes: int,
    pack: bool = False,
    consumers: int = 1,
) -> SpoolPlan:
    """Held-out batches (pinned; as ``loop.evaluate`` groups them), then the train batches to read.

    All kept when everything fits. Otherwise samples read again later are kept, in the order they
    are first read, while the budget holds beside room for ``consumers`` + 1 streamed batches;
    each batch's other samples form a unit of their own, deleted once read.
    """
    held = [
        unit_of([heldout[i] for i in idx], budget, True)
        for idx in plan_batches([s.length for s in heldout], budget, seed, 0, pack)
    ]
    seen: set[str] = set()
    firsts: list[Unit] = []
    for batch in batches:
        new = [s for s in batch if s.sample_id not in seen]
        seen.update(s.sample_id for s in new)
        if new:
            firsts.append(unit_of(new, budget, True))
    kept = held + firsts
    states = sum(unit_bytes(sum(u.tokens), hidden_size) for u in kept)
    unique = sum(sum(u.tokens) for u in kept)
    if states <= budget_bytes:
        return SpoolPlan(kept, True, unique, unique, states, budget_bytes)
    largest = max((unit_bytes(sum(min(s.length, budget) for s in b), hidden_size) for b in batches), default=0)
    room = budget_bytes - sum(unit_bytes(sum(u.tokens), hidden_size) for u in held) - (consumers + 1) * largest
    units, batch_of = _partly_kept(batches, budget, hidden_size, room)
    units = held + units
    batch_of = {len(held) + index: n for index, n in batch_of.items()}
    return SpoolPlan(units, False, unique, sum(sum(u.tokens) for u in units), states, budget_bytes, batch_of)


def _partly_kept(
    batches: list[list[Sample]], budget: int, hidden_size: int, room: int
) -> tuple[list[Unit], dict[int, int]]:
    """Per batch: a kept unit of its first-read samples that fit ``room`` bytes and are read again,
    then a streamed unit of the rest of the batch; and each streamed unit's batch number."""
    reads = Counter(s.sample_id for b in batches for s in b)
    kept: set[str] = set()
    units: list[Unit] = []
    batch_of: dict[int, int] = {}
    for n, batch in enumerate(batches):
        keep = []
        for s in batch:
            cost = unit_bytes(min(s.length, budget), hidden_size) - (HEADER_SLACK if keep else 0)
            if s.sample_id not in kept and reads[s.sample_id] > 1 and cost <= room:
                keep.append(s)
                kept.add(s.sample_id)
                room -= cost
        if keep:
            units.append(unit_of(keep, budget, True))
        rest = [s for s in batch if s.sample_id not in kept]
        if rest:
            batch_of[len(units)] = n
            units.append(unit_of(rest, budget, False))
    return units, batch_of


class SpoolReader(Reader):
    """The trainer's reader in mode online-vllm: samples from sequences/, states from the spool."""

    def __init__(self, sequences_dir: str | Path, spool_dir: str | Path, run_id: str, timeout_s: float) -> None:
        self.sequences_dir, self.spool = Path(sequences_dir), Spool(spool_dir)
        self.run_id, self.timeout_s = run_id, timeout_s
        self.plan: SpoolPlan | None = None
        self._kept: dict[str, tuple[int, int, int]] = {}  # sample id -> (unit, offset, tokens)
        self._queued: dict[tuple[str, ...], deque[int]] = {}  # batch ids -> units not yet read
        self._open: dict[int, object] = {}
        self._seen: set[int] = set()
        self.wait_s, self.first_wait_s, self.units_read, self.begun = 0.0, None, 0, None

    def samples(self) -> list[Sample]:
        from eagle3_core.contracts import sequences

        found = []
        for part in sequences.parts(self.sequences_dir):
            ids, counts = sequences.lengths(part)
            found += [Sample(sid, n, part.name, row) for row, (sid, n) in enumerate(zip(ids, counts)) if n > 0]
        return found

    def start(self, trainer) -> None:
        """Ask the engine for the trainer's micro-batches from here to the last, and the held-out set."""
        world = trainer.dev.world
        requests, plan = requests_for(
            self, trainer.cfg, trainer.inputs, trainer.batches_to_read(), trainer.heldout, world
        )
        self.begin(requests, plan, trainer.dev.rank, world)
        if trainer.dev.rank == 0:
            print(plan.describe(), flush=True)

    def begin(self, requests: Requests, plan: SpoolPlan, rank: int, world: int = 1) -> None:
        """Rank 0 clears the spool and writes the requests; every rank learns where each unit's samples are.

        The plan's batch ``n`` is read by rank ``n % world`` (the batches start at a multiple of
        ``world``): a rank queues only its own streamed units, so a batch that comes back in a
        later epoch on another rank is never taken from the rank it was made for."""
        self.plan, self.begun = plan, time.monotonic()
        if rank == 0:
            self.spool.clear()
            self.spool.write_requests(requests)
        for index, unit in enumerate(plan.units):
            if unit.pinned:
                offset = 0
                for sample_id, tokens in zip(unit.sample_ids, unit.tokens):
                    self._kept[sample_id] = (index, offset, tokens)
                    offset += tokens
            elif plan.batch_of[index] % world == rank:
                self._queued.setdefault(tuple(unit.sample_ids), deque()).append(index)

    def _pieces(self, batch: list[Sample]) -> list[tuple[int, int, int]]:
        """(unit, offset, tokens) of each sample: kept ones where they are kept, the others from the
        batch's next streamed unit."""
        rest = tuple(s.sample_id for s in batch if s.sample_id not in self._kept)
        streamed: dict[str, tuple[int, int, int]] = {}
        if rest:
            queue = self._queued.get(rest)
            if not queue:
                raise StageError(
                    f"the trainer asked for a batch the spool plan does not hold ({rest[0]})",
                    fix="a bug: the batch plan changed after the requests were written",
                )
            index, offset = queue.popleft(), 0
            for sample_id, tokens in zip(self.plan.units[index].sample_ids, self.plan.units[index].tokens):
                streamed[sample_id] = (index, offset, tokens)
                offset += tokens
        return [self._kept.get(s.sample_id) or streamed[s.sample_id] for s in batch]

    def load(
        self, batch: list[Sample], budget: int, dtype: torch.dtype, device, pack: bool = False
    ) -> dict[str, torch.Tensor]:
        pieces = self._pieces(batch)
        rows = slice_rows((self._handle(index), offset, offset + tokens) for index, offset, tokens in pieces)
        for index in {p[0] for p in pieces}:
            if not self.plan.units[index].pinned:
                self._open.pop(index, None)  # close the mapping before the file goes
                self.spool.unit_path(index).unlink(missing_ok=True)
        return on_device(collate(rows, pack), device, dtype)

    def _handle(self, index: int):
        from safetensors import safe_open

        if index not in self._open:
            if index not in self._seen:
                self._await(index)
                check_unit(self.spool.unit_path(index))
                self._seen.add(index)
                self.units_read += 1
            if len(self._open) >= OPEN_UNITS:  # kept units are many when the set fits: bound the mappings
                self._open.pop(next(iter(self._open)))
            self._open[index] = safe_open(str(self.spool.unit_path(index)), framework="pt")
        return self._open[index]

    def _await(self, index: int) -> None:
        """Block until the unit's file is in place, failing when the engine failed or went silent."""
        from eagle3_core.contracts.hidden import read_metadata

        path, started, checked = self.spool.unit_path(index), time.monotonic(), 0.0
        while True:
            meta = read_metadata(path) if path.exists() else None
            if meta is not None and meta.get("run_id") == self.run_id:
                waited = time.monotonic() - started
                self.first_wait_s = waited if self.first_wait_s is None else self.first_wait_s
                self.wait_s += waited
                return
            if meta is not None:  # an earlier run's producer finished late
                path.unlink(missing_ok=True)
            elif path.exists():  # units are renamed into place whole: an unreadable one is damaged
                check_unit(path)
            if time.monotonic() - checked >= STATUS_EVERY_S:
                checked = time.monotonic()
                self._check_engine(started)
            time.sleep(POLL_S)

    def _check_engine(self, started: float) -> None:
        status = self.spool.status()
        if status.get("run_id") in ("", self.run_id) and status.get("state") == "failed":  # "": while loading
            raise StageError(
                f"the hidden-state engine failed: {status.get('error')}",
                path=str(self.spool.root),
                fix="read the engine's error above; rerun to resume",
            )
        alive = max(status.get("heartbeat") or 0.0, time.time() - (time.monotonic() - started))
        if time.time() - alive > self.timeout_s:
            raise StageError(
                f"no hidden states from the engine for {self.timeout_s:.0f} s",
                path=str(self.spool.root),
                fix="check that the engine serving this spool runs (train.online_vllm.endpoint), "
                "or raise train.online_vllm.wait_timeout_s",
            )

    def stats(self) -> dict:
        """The plan's figures and the trainer's waits: ``busy_share`` is the share of the trainer's time
        since it asked for states spent not waiting for them (steps and evals), engine start-up included."""
        elapsed = time.monotonic() - self.begun if self.begun else 0.0
        return {
            **(self.plan.figures() if self.plan else {}),
            "wait_s": round(self.wait_s, 3),
            "first_wait_s": round(self.first_wait_s or 0.0, 3),
            "trainer_s": round(elapsed, 3),
            "busy_share": round(1 - self.wait_s / elapsed, 4) if elapsed else None,
            "units_read": self.units_read,
        }


def requests_for(
    reader: SpoolReader, cfg, inputs, batches: list[list[Sample]], heldout: list[Sample], world: int
) -> tuple[Requests, SpoolPlan]:
    """The run's requests: its train batches still to read and the held-out set, under the budget."""
    budget_bytes = int(cfg.online_vllm.spool_gb * 2**30)
    plan = plan_units(
        batches,
        heldout,
        cfg.micro_batch_tokens,
        cfg.seed,
        inputs.hidden_size,
        budget_bytes,
        cfg.packing,
        consumers=world,
    )
    requests = Requests(
        run_id=reader.run_id,
        sequences_dir=str(reader.sequences_dir),
        target_path=inputs.target_path,
        layers=inputs.aux_layer_ids,
        num_hidden_layers=int(inputs.target_config["num_hidden_layers"]),
        hidden_size=inputs.hidden_size,
        budget_bytes=budget_bytes,
        consumers=world,
        units=plan.units,
    )
    requests.check()
    return requests, plan
