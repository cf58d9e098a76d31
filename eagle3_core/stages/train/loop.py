"""The training loop inside the trainer process: DeepSpeed engine, TTT steps, metrics, checkpoints.

Guarantees:
- Before the first step, the held-out simulated acceptance length of the untrained drafter is
  measured and kept (in the checkpoint's client state, so a resumed run still reports it).
- Micro-batch ``n`` of the run is the plan's batch ``n * world + rank``; the checkpoint keeps
  ``n``, so a resumed run continues with the very batch the killed one would have read next.
- A checkpoint is saved every ``checkpoint_every`` optimizer steps and after the last; the
  export is written after the last checkpoint, by rank 0, with its model card.
- Rank 0 sends every metrics line to the ``report_to`` trackers (``train.tracking``); their run
  ids live in the checkpoint, so a resumed run continues the same run.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from eagle3_core.errors import InputError
from eagle3_core.stages.train import checkpoint
from eagle3_core.stages.train.build import build_reader, build_target_head
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.data import BatchPlan, Sample, plan_batches, split_heldout
from eagle3_core.stages.train.ds_config import deepspeed_config
from eagle3_core.stages.train.export import full_state
from eagle3_core.stages.train.inputs import TrainInputs
from eagle3_core.stages.train.kind_hooks import training_for
from eagle3_core.stages.train.loss import StepCounts, TargetHead, shift, simulated_acceptance_length, ttt_loss
from eagle3_core.stages.train.metrics import MetricsLog
from eagle3_core.stages.train.tracking import Tracker, log_record, start_tracker


@dataclass
class Device:
    device: torch.device
    dtype: torch.dtype
    rank: int
    world: int


def pick_device(cfg: TrainConfig) -> Device:
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return Device(torch.device("cuda", local), getattr(torch, cfg.state_dtype(True)), rank, world)
    return Device(torch.device("cpu"), getattr(torch, cfg.state_dtype(False)), rank, world)


def total_steps(cfg: TrainConfig, batches_per_epoch: int, world: int) -> int:
    if cfg.max_steps is not None:
        return cfg.max_steps
    return max(1, math.ceil(cfg.epochs * batches_per_epoch / (world * cfg.grad_accum)))


def step_record(counts: StepCounts, loss: float | None = None) -> dict[str, Any]:
    acc = counts.accuracies()
    apd = simulated_acceptance_length(acc) - 1.0
    record = {
        "loss_k": [round(x, 5) for x in counts.mean_losses()],
        "acc_k": [round(a, 4) for a in acc],
        "accepted_per_draft": round(apd, 4),
        "sim_acceptance_length": round(apd + 1.0, 4),
        "positions": counts.count[0] if counts.count else 0,
    }
    if loss is not None:
        record = {"loss": round(loss, 5), **record}
    return record


def forward_batch(module, head: TargetHead, batch: dict, cfg: TrainConfig):
    """One TTT forward: (loss, counts) for a batch dict from a reader."""
    probs, in_draft = head.labels(batch["final"])  # (B, T, V_d), (B, T)
    segments = batch.get("segments")  # (B, T) packed samples
    outputs = module.unroll(
        shift(batch["input_ids"], 1), batch["aux"], cfg.ttt_steps, segments, recompute=cfg.recompute_ttt_steps
    )
    return ttt_loss(outputs, probs, in_draft, batch["loss_mask"], cfg.ttt_decay, segments, module.logits)


@torch.no_grad()
def evaluate(module, head, reader, heldout: list[Sample], cfg: TrainConfig, dev: Device) -> dict[str, Any]:
    """Held-out per-step accuracy and simulated acceptance length (every rank sees all of it)."""
    counts = StepCounts()
    for indices in plan_batches([s.length for s in heldout], cfg.micro_batch_tokens, cfg.seed, 0, cfg.packing):
        batch = reader.load(
            [heldout[i] for i in indices], cfg.micro_batch_tokens, dev.dtype, dev.device, pack=cfg.packing
        )
        _, c = training_for(cfg.kind).forward(module, head, batch, cfg)
        counts.add(c)
    if not counts.count or counts.count[0] == 0:  # a loss of 0 over nothing would read as a perfect drafter
        raise InputError(
            f"the held-out set ({len(heldout)} samples) has no supervised position to evaluate",
            path=heldout[0].where if heldout else None,
            fix="check the loss_mask of sequences/ (every held-out sample is masked out), "
            "or raise train.heldout_fraction",
        )
    return step_record(counts)


def rank_total(value: float, dev: Device) -> float:
    """The sum of ``value`` over the ranks."""
    if dev.world == 1:
        return value
    import torch.distributed as dist

    total = torch.tensor([value], dtype=torch.float64, device=dev.device)
    dist.all_reduce(total)
    return float(total)


def rank_mean(value: float, dev: Device) -> float:
    """The mean of ``value`` over the ranks: the loss of the whole global batch (what the gradients average)."""
    return rank_total(value, dev) / dev.world


def rank_sum(counts: StepCounts, dev: Device) -> StepCounts:
    """``counts`` (summed over micro-batches by ``add``) summed over the ranks: the step's
    accuracies and per-step losses over the whole global batch, as ``loss`` is."""
    if dev.world == 1:
        return counts
    import torch.distributed as dist

    total = torch.tensor([counts.loss, counts.count, counts.correct], dtype=torch.float64, device=dev.device)
    dist.all_reduce(total)
    loss, count, correct = total.tolist()
    return StepCounts(loss, [int(n) for n in count], [int(c) for c in correct])


class Trainer:
    """Owns the engine and the data for one run; ``run`` trains to the last step and exports."""

    def __init__(self, cfg: TrainConfig, inputs: TrainInputs, out_dir: str | Path, facts: dict | None = None) -> None:
        import deepspeed

        self.cfg, self.inputs, self.out = cfg, inputs, Path(out_dir)
        self.facts = facts or {}  # provenance.run_facts: for the tracking run and the card
        self.tracker = Tracker([])  # started in resume, once the run's step and ids are known
        self.dev = pick_device(cfg)
        self.reader = build_reader(inputs)
        # sample-id order: the same batch plan whichever reader lists the samples (disk or engine)
        samples = sorted(self.reader.samples(), key=lambda s: s.sample_id)
        train, self.heldout = split_heldout(samples, cfg.heldout_fraction)
        if not train:
            raise InputError(
                "empty dataset: no training sample with tokens",
                path=inputs.hidden_dir or inputs.sequences_dir,
                fix="extract (or reconstruct) a non-empty set, or lower train.heldout_fraction",
            )
        self.plan = BatchPlan(train, cfg.micro_batch_tokens, cfg.seed, pack=cfg.packing)
        self.total = total_steps(cfg, self.plan.per_epoch, self.dev.world)
        self.kind = training_for(cfg.kind)  # the drafter kind's model, loss and export (drafter/kinds.py)
        drafter = self.kind.build(inputs, cfg, cfg.init_from)
        self.ds_config = deepspeed_config(cfg, self.total, bf16=self.dev.dtype == torch.bfloat16)
        drafter.to(self.dev.device)
        self.engine, _, _, self.scheduler = deepspeed.initialize(
            model=drafter, model_parameters=[p for p in drafter.parameters() if p.requires_grad], config=self.ds_config
        )
        self.head = build_target_head(inputs, drafter, self.dev.device)
        self.metrics = MetricsLog(self.out / "metrics.jsonl", enabled=self.dev.rank == 0)
        self.ckpt_dir = self.out / "checkpoints"
        self.micro, self.evals, self.resumed_from, self.slots = 0, {}, None, 0

    def resume(self) -> None:
        client = checkpoint.resume(self.engine, self.ckpt_dir)
        if client is not None:
            self.micro, self.evals = client["micro_step"], client.get("evals", {})
            self.resumed_from = int(client["step"])
        # no checkpoint: a fresh start, so every line is stale (the killed run's step-0 held-out line too)
        self.metrics.truncate_after(self.engine.global_steps if client is not None else -1)
        self.tracker = start_tracker(self.cfg, self.facts, self.metrics.path, self.dev.rank, client)
        self.metrics.sink = functools.partial(log_record, self.tracker)

    def log_eval(self, name: str) -> None:
        record = evaluate(self.engine.module, self.head, self.reader, self.heldout, self.cfg, self.dev)
        self.evals[name] = {"step": self.engine.global_steps, **record}
        self.metrics.write({"step": self.engine.global_steps, "split": "heldout", "name": name, **record})

    def save(self) -> None:
        checkpoint.save(
            self.engine,
            self.ckpt_dir,
            self.engine.global_steps,
            {
                "step": self.engine.global_steps,
                "micro_step": self.micro,
                "evals": self.evals,
                "tracking": self.tracker.ids(),
            },
            keep=self.cfg.keep_checkpoints,
        )

    def train_step(self) -> tuple[float, StepCounts, int]:
        """One optimizer step: ``grad_accum`` micro-batches on each rank; the loss is their mean over all ranks,
        the counts their sum over all ranks; the tokens are this rank's."""
        losses, counts, tokens = [], StepCounts(), 0
        for _ in range(self.cfg.grad_accum):
            samples = self.plan.batch(self.micro * self.dev.world + self.dev.rank)
            batch = self.reader.load(
                samples, self.cfg.micro_batch_tokens, self.dev.dtype, self.dev.device, pack=self.cfg.packing
            )
            self.slots += batch["segments"].numel()
            loss, micro_counts = self.kind.forward(self.engine.module, self.head, batch, self.cfg)
            self.engine.backward(loss)
            self.engine.step()
            self.micro += 1
            losses.append(float(loss.detach()))
            counts.add(micro_counts)
            tokens += sum(min(s.length, self.cfg.micro_batch_tokens) for s in samples)
        return rank_mean(sum(losses) / len(losses), self.dev), rank_sum(counts, self.dev), tokens

    def batches_to_read(self) -> list[list[Sample]]:
        """This run's micro-batches from the resumed one to the last, every rank's, in reading order."""
        world, first = self.dev.world, self.micro * self.dev.world
        end = self.total * self.engine.gradient_accumulation_steps() * world
        return [self.plan.batch(n) for n in range(first, end)]

    def run(self) -> dict[str, Any]:
        """Train to the last step and export; the tracking run ends with it, failed or finished."""
        try:
            summary = self.train()
        except BaseException:
            self.tracker.close(failed=True)
            raise
        self.tracker.close()
        return summary

    def train(self) -> dict[str, Any]:
        self.resume()
        self.reader.start(self)  # a spool asks its engine for what this run will read
        if "initial" not in self.evals and self.heldout:
            self.log_eval("initial")
        started, tokens, window_tokens, window_start = time.monotonic(), 0, 0, time.monotonic()
        while self.engine.global_steps < self.total:
            loss, counts, n = self.train_step()
            tokens, window_tokens = tokens + n, window_tokens + int(rank_total(n, self.dev))  # the window: all ranks'
            step = self.engine.global_steps
            if step % self.cfg.log_every == 0 or step == self.total:
                elapsed = time.monotonic() - window_start
                self.metrics.write(
                    {
                        "step": step,
                        "split": "train",
                        **step_record(counts, loss),
                        "lr": self.scheduler.get_last_lr()[0] if self.scheduler else self.cfg.lr,
                        "tokens": window_tokens,
                        "tokens_per_s": round(window_tokens / max(elapsed, 1e-9), 1),
                        "total_steps": self.total,
                        "elapsed_s": round(time.monotonic() - started, 2),
                    }
                )
                window_tokens, window_start = 0, time.monotonic()
            if self.cfg.eval_every and step % self.cfg.eval_every == 0 and step < self.total and self.heldout:
                self.log_eval(f"step-{step}")
            if step % self.cfg.checkpoint_every == 0 and step < self.total:
                self.save()
        if self.heldout:
            self.log_eval("final")
        if checkpoint.latest_tag(self.ckpt_dir) != checkpoint.tag(self.engine.global_steps):
            self.save()
        return self.finish(tokens, time.monotonic() - started)

    def finish(self, tokens: int, seconds: float) -> dict[str, Any]:
        state = full_state(self.engine)
        if self.dev.rank == 0:
            drafter = self.kind.build(self.inputs, self.cfg)
            drafter.load_state_dict(
                {k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=False
            )
            self.kind.export(drafter, self.out / "export", self.cfg)
            self.write_card()
        return {
            "steps": self.engine.global_steps,
            "total_steps": self.total,
            "resumed_from": self.resumed_from,
            "train_samples": len(self.plan.samples),
            "heldout_samples": len(self.heldout),
            "batches_per_epoch": self.plan.per_epoch,
            "tokens_this_process": tokens,
            "train_seconds_this_process": round(seconds, 2),
            "evals": self.evals,
            "padding_share_this_process": round(1 - tokens / max(self.slots, 1), 4),
            "deepspeed_config": self.ds_config,
            "device": str(self.dev.device),
            "world_size": self.dev.world,
            "spool": self.reader.stats(),
        }

    def write_card(self) -> None:
        """drafter/export/README.md; a card that cannot be written is a warning, never a failed run."""
        from eagle3_core.drafter.card import write_card
        from eagle3_core.tracking import warn

        final = self.evals.get("final") or {}
        training = {
            "steps": self.engine.global_steps,
            **self.kind.facts(self.cfg),
            "heldout_sim_acceptance_length": final.get("sim_acceptance_length"),
        }
        try:
            write_card(self.out / "export", self.facts, training)
        except Exception as exc:  # noqa: BLE001 - the weights are what the run is for
            warn(f"the model card was not written ({type(exc).__name__}: {exc})")
