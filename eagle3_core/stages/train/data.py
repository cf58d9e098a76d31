"""Samples, the held-out split, the batch plan, and two readers (hidden/ shards, the target in process).

Guarantees:
- The split is a pure function of each sample id (sha256), so it never moves between runs.
- The batch plan is a pure function of (lengths, budget, seed, epoch): batch ``n`` of a run is
  the same batch after a resume, which is what "same data order" means here.
- A batch is a dict of tensors: ``input_ids`` (B, T) long, ``aux`` (B, T, 3, H),
  ``final`` (B, T, H), ``loss_mask`` (B, T) bool, ``segments`` (B, T) long. Padded: one sample
  a row, right-padded with zeros (loss_mask 0, segment 0; samples are segment 1). Packed
  (``pack=True``): one row, the samples end to end as segments 1, 2, ... with no padding; the
  drafter never attends across a segment boundary. A sample longer than the token budget is
  cut to the budget.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from eagle3_core.states.writer import refuse_non_finite

# Sorting by length inside windows of this many samples keeps padding low (most batches hold
# similar lengths) while the window order stays shuffled.
SORT_WINDOW = 64


@dataclass(frozen=True)
class Sample:
    sample_id: str
    length: int
    where: str  # shard file (offline) or parquet part (online)
    offset: int  # first token row in the shard (offline) or row in the part (online)


def heldout_share(sample_id: str) -> float:
    return int(hashlib.sha256(sample_id.encode()).hexdigest()[:12], 16) / float(16**12)


def split_heldout(samples: list[Sample], fraction: float) -> tuple[list[Sample], list[Sample]]:
    """(train, held-out) by sample-id hash; at least one held out when fraction > 0 and n >= 2."""
    heldout = [s for s in samples if heldout_share(s.sample_id) < fraction]
    if fraction > 0 and not heldout and len(samples) >= 2:
        heldout = [min(samples, key=lambda s: heldout_share(s.sample_id))]
    keep = {s.sample_id for s in heldout}
    return [s for s in samples if s.sample_id not in keep], heldout


def plan_batches(lengths: list[int], budget: int, seed: int, epoch: int, pack: bool = False) -> list[list[int]]:
    """Index lists, each within ``budget`` tokens: padded size (count x longest), or summed lengths if packed."""
    order = list(range(len(lengths)))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    windows = [sorted(order[i : i + SORT_WINDOW], key=lambda j: lengths[j]) for i in range(0, len(order), SORT_WINDOW)]
    batches: list[list[int]] = []
    for window in windows:
        current, longest, used = [], 0, 0
        for j in window:
            size = min(lengths[j], budget)
            cost = used + size if pack else max(longest, size) * (len(current) + 1)
            if current and cost > budget:
                batches.append(current)
                current, longest, used = [], 0, 0
            current.append(j)
            longest, used = max(longest, size), used + size
        if current:
            batches.append(current)
    random.Random(f"{seed}:{epoch}:batches").shuffle(batches)
    return batches


class BatchPlan:
    """Micro-batch ``n`` of the whole run (epochs concatenated), the same after a resume.

    Epochs hold different batch counts (each packs its own shuffle), so ``n`` is located by
    walking the epochs' sizes, which are cached.
    """

    def __init__(self, samples: list[Sample], budget: int, seed: int, pack: bool = False) -> None:
        self.samples, self.budget, self.seed, self.pack = samples, budget, seed, pack
        self._lengths = [s.length for s in samples]
        self._current: tuple[int, list[list[int]]] | None = None
        self._sizes: list[int] = []
        self.per_epoch = len(self._epoch(0))

    def _epoch(self, epoch: int) -> list[list[int]]:
        if self._current is None or self._current[0] != epoch:
            self._current = (epoch, plan_batches(self._lengths, self.budget, self.seed, epoch, self.pack))
        return self._current[1]

    def _size(self, epoch: int) -> int:
        while len(self._sizes) <= epoch:
            self._sizes.append(len(self._epoch(len(self._sizes))))
        return self._sizes[epoch]

    def batch(self, n: int) -> list[Sample]:
        epoch = 0
        while n >= self._size(epoch):
            n -= self._size(epoch)
            epoch += 1
        return [self.samples[j] for j in self._epoch(epoch)[n]]


def slice_rows(pieces) -> dict[str, list[torch.Tensor]]:
    """Per batch key, the token rows [start, end) of each (open safetensors shard or unit, start, end)."""
    from eagle3_core.contracts.hidden import NAMES

    rows: dict[str, list[torch.Tensor]] = {k: [] for k in NAMES}
    for handle, start, end in pieces:
        for key, name in NAMES.items():
            rows[key].append(handle.get_slice(name)[start:end])
    return rows


def collate(rows: dict[str, list[torch.Tensor]], pack: bool) -> dict[str, torch.Tensor]:
    """Per-sample (T_i, ...) tensors -> the batch dict: padded rows, or one packed row; adds ``segments``."""
    lengths = [len(r) for r in rows["input_ids"]]
    numbers = [torch.full((n,), i + 1 if pack else 1, dtype=torch.long) for i, n in enumerate(lengths)]
    if pack:
        return {**{k: torch.cat(v)[None] for k, v in rows.items()}, "segments": torch.cat(numbers)[None]}
    T = max(lengths)
    return {**{k: pad_stack(v, T) for k, v in rows.items()}, "segments": pad_stack(numbers, T)}


def on_device(batch: dict[str, torch.Tensor], device, dtype) -> dict[str, torch.Tensor]:
    """A collated batch in the trainer's types: ids long, states in the compute dtype, mask bool."""
    return {
        "input_ids": batch["input_ids"].long().to(device),
        "aux": batch["aux"].to(device, dtype),
        "final": batch["final"].to(device, dtype),
        "loss_mask": batch["loss_mask"].bool().to(device),
        "segments": batch["segments"].to(device),
    }


def pack_padded(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A padded batch (segments 1 = sample, 0 = padding) as one packed row."""
    real = batch["segments"] > 0  # (B, T)
    rows = {k: [v[b][real[b]] for b in range(v.shape[0])] for k, v in batch.items() if k != "segments"}
    return collate(rows, pack=True)


def padding_share(batch: dict[str, torch.Tensor]) -> float:
    """Share of the batch's token slots that hold padding (segment 0)."""
    return int((batch["segments"] == 0).sum()) / batch["segments"].numel()


def pad_stack(rows: list[torch.Tensor], length: int) -> torch.Tensor:
    """Right-pad each (T_i, ...) row with zeros to ``length`` and stack: (B, length, ...)."""
    out = rows[0].new_zeros((len(rows), length, *rows[0].shape[1:]))
    for i, row in enumerate(rows):
        out[i, : row.shape[0]] = row[:length]
    return out


class Reader:
    """The trainer's side of a source of hidden states (``hidden_sources.py``): ``samples()``, then
    ``load(batch, budget, dtype, device, pack)`` -> the batch dict above."""

    def start(self, trainer) -> None:
        """Called once the trainer has resumed, before the first load (a spool requests its units here)."""

    def stats(self) -> dict | None:
        """The reader's own figures for the run summary (the spool's), or None."""
        return None


class OfflineReader(Reader):
    """Reads samples from hidden/ shards (safetensors slices: only the rows asked for)."""

    def __init__(self, hidden_dir: str | Path) -> None:
        self.hidden_dir = Path(hidden_dir)
        self._open: dict[str, object] = {}

    def samples(self) -> list[Sample]:
        from eagle3_core.contracts import hidden

        t = hidden.read_index(self.hidden_dir).to_pydict()
        return [
            Sample(i, int(n), s, int(o))
            for i, s, o, n in zip(t["sample_id"], t["shard"], t["offset"], t["length"])
            if int(n) > 0
        ]

    def _shard(self, name: str):
        from safetensors import safe_open

        if name not in self._open:
            if len(self._open) >= 4:  # a batch touches a few shards; keep memory bounded
                self._open.clear()
            self._open[name] = safe_open(str(self.hidden_dir / name), framework="pt")
        return self._open[name]

    def load(
        self, batch: list[Sample], budget: int, dtype: torch.dtype, device, pack: bool = False
    ) -> dict[str, torch.Tensor]:
        rows = slice_rows((self._shard(s.where), s.offset, s.offset + min(s.length, budget)) for s in batch)
        for sample, aux, final in zip(batch, rows["aux"], rows["final"]):
            refuse_non_finite(aux, final, sample.sample_id, self.hidden_dir / sample.where, written_by="extract")
        return on_device(collate(rows, pack), device, dtype)


class OnlineReader(Reader):
    """Runs the frozen target over sequences/ rows to make the same batches, storing nothing."""

    def __init__(self, sequences_dir: str | Path, target_path: str, layers: list[int], trust_remote_code: bool) -> None:
        self.sequences_dir, self.target_path, self.layers = Path(sequences_dir), target_path, layers
        self.trust_remote_code = trust_remote_code
        self._rows: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
        self._model = None

    def samples(self) -> list[Sample]:
        from eagle3_core.contracts import sequences

        found = []
        for part in sequences.parts(self.sequences_dir):
            t = sequences.read(part, ["sample_id", "input_ids", "loss_mask"]).to_pydict()
            for row, (sid, ids, mask) in enumerate(zip(t["sample_id"], t["input_ids"], t["loss_mask"])):
                if ids:
                    self._rows[(part.name, row)] = (ids, mask)
                    found.append(Sample(sid, len(ids), part.name, row))
        return found

    def _target(self, dtype: torch.dtype, device):
        if self._model is None:
            from eagle3_core.states.target_model import load_target_model

            self._model = load_target_model(self.target_path, self.trust_remote_code, str(device), dtype)
        return self._model

    @torch.no_grad()
    def load(
        self, batch: list[Sample], budget: int, dtype: torch.dtype, device, pack: bool = False
    ) -> dict[str, torch.Tensor]:
        T = min(max(s.length for s in batch), budget)
        ids = pad_stack([torch.tensor(self._rows[(s.where, s.offset)][0]) for s in batch], T).long().to(device)
        mask = pad_stack([torch.tensor(self._rows[(s.where, s.offset)][1]) for s in batch], T).bool().to(device)
        attention = pad_stack([torch.ones(min(s.length, T), dtype=torch.long) for s in batch], T).to(device)
        base = self._target(dtype, device).model  # the decoder stack, without lm_head
        out = base(input_ids=ids, attention_mask=attention, output_hidden_states=True)
        # vLLM's layer id k is the input of decoder layer k = hidden_states[k] (as extract writes it)
        real = attention[..., None].to(dtype)  # (B, T, 1)
        aux = torch.stack([out.hidden_states[k] for k in self.layers], dim=2)  # (B, T, 3, H)
        padded = {
            "input_ids": ids,
            "aux": aux.to(dtype) * real[..., None],  # padding zeroed as offline
            "final": out.last_hidden_state.to(dtype) * real,
            "loss_mask": mask & attention.bool(),
            "segments": attention,
        }
        for sample, aux, final in zip(batch, padded["aux"], padded["final"]):  # the target's: its dtype is the fix
            refuse_non_finite(aux, final, sample.sample_id, self.sequences_dir / sample.where)
        return pack_padded(padded) if pack else padded
