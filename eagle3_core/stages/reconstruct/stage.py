"""`ReconstructStage`: generations/ -> sequences/ (token ids with think tokens in place, loss mask).

Guarantees:
- every accepted generation ends as a row or a counted reject (``counts.rejected``, per reason
  in ``details.reject_reasons``, each with its sample id in ``stats/part-*.json``);
- where a record holds the server's token ids, the rebuilt sequence is compared with them:
  ``details.server_check`` (checked, matched, match_rate; ``repeated_think_close`` when some of the
  mismatches are only think-closes the model wrote again, which the parser drops from the text;
  ``warning`` under 99%, ``server_check.py``)
  and ``details.mismatches`` (first differing position of each, the first 100; all of them in the
  shard stats);
- the tokenizer's special ids are verified against the recipe before any work, and so are the
  chat settings generate recorded (``chat.recorded_chat``): prompts render with those;
- resumable per shard (see ``shards``); a complete manifest for the same config, tokenizer and
  generations returns at once; a changed one starts over.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_core.contracts.details import ReconstructDetails
from eagle3_core.errors import StageError
from eagle3_core.rebuild.build import Reconstructor
from eagle3_core.run.driver import Stage, drive
from eagle3_core.run.manifest import StageManifest, input_fingerprint
from eagle3_core.run.progress import Reporter
from eagle3_core.run.rejects import Rejects
from eagle3_core.stages.reconstruct.chat import recorded_chat
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.server_check import server_check
from eagle3_core.stages.reconstruct.shards import (
    InputPlan,
    ShardJob,
    load_stats,
    plan_inputs,
    plan_shards,
    run_shard,
    shard_done,
)
from eagle3_core.target.config import ChatSettings, TargetConfig
from eagle3_core.target.tokenizer import TokenFacts, load_tokenizer, token_facts

STAGE = "reconstruct"
MANIFEST_MISMATCHES = 100  # the manifest shows the first ones; the shard stats keep them all


@dataclass
class ReconstructStage(Stage):
    """Rebuild every accepted generation as ids + loss mask under ``out_dir`` (the sequences/ folder)."""

    name, shards, versions = STAGE, ("part-*.parquet",), ("transformers", "tokenizers", "pyarrow")
    # shards made with other keys must not mix; stats/ holds nothing else and goes whole (as a link
    # when it is one: its target is not ours to empty)
    outputs = ("part-*.parquet", "stats")

    cfg: ReconstructConfig
    target: TargetConfig
    generations_dir: str
    out_dir: str
    reporter: Reporter | None = None

    def keys(self) -> tuple[str, dict[str, str]]:
        target = self.target
        target.require_path("--tokenizer")
        self.tokenizer = load_tokenizer(target.path, target.trust_remote_code)
        self.facts = token_facts(self.tokenizer, target, target.path)
        self.inputs = plan_inputs(self.generations_dir)
        self.chat = recorded_chat(self.generations_dir, target)
        fingerprints = {"generations": input_fingerprint(self.generations_dir), "tokenizer": self.facts.fingerprint}
        return self.key(reconstruct=self.cfg, target=target_tokens(target), chat=self.chat), fingerprints

    def plan(self) -> list[list[ShardJob]]:
        """One unit, the shards left: a process pool shares them out (``cfg.workers``)."""
        self.jobs = plan_shards(self.inputs.total, self.cfg.shard_rows)
        todo = [job for job in self.jobs if not shard_done(self.out_dir, job)]
        self.reporter.log(
            f"reconstruct: {self.inputs.total} generations in {len(self.jobs)} shards, "
            f"{len(self.jobs) - len(todo)} already done"
        )
        return [todo]

    def run(self, todo: list[ShardJob]) -> None:
        reconstructor = Reconstructor(self.tokenizer, self.facts, self.cfg, self.chat, self.target)
        run_jobs(todo, self.inputs, self.out_dir, reconstructor, self.target, self.reporter, len(self.jobs))

    def finish(self, manifest: StageManifest) -> Rejects:
        stats = [load_stats(self.out_dir, job) for job in self.jobs]
        return summarize(manifest, stats, self.facts, self.cfg, self.target, self.out_dir)


def run_reconstruct(*args, **kwargs) -> StageManifest:
    """The stage whole in this process (tests, benchmarks): ``drive(ReconstructStage(...))``."""
    return drive(ReconstructStage(*args, **kwargs))


def target_tokens(target: TargetConfig) -> dict[str, Any]:
    """The parts of the target that decide the layout (not where it lives, nor its template's provenance,
    nor the tool-call token only evaluation reads, nor which rows generate sends: rows with tools, tool loops)."""
    return target.model_dump(
        mode="json",
        exclude={
            "path",
            "trust_remote_code",
            "chat",
            "aux_layer_ids",
            "template_version",
            "tool_call_start",
            "calls_tools",
            "renders_past_tool_calls",
        },
    )


def run_jobs(
    todo: list[ShardJob],
    plan: InputPlan,
    out_dir: Path,
    reconstructor: Reconstructor,
    target: TargetConfig,
    reporter: Reporter,
    total_shards: int,
) -> None:
    """Run the shards left, in this process or in ``cfg.workers`` processes."""
    done = total_shards - len(todo)
    cfg = reconstructor.cfg
    if cfg.workers == 1 or len(todo) <= 1:
        for job in todo:
            run_shard(job, plan, out_dir, reconstructor)
            done += 1
            reporter.progress(STAGE, done, total_shards, unit="shards")
        return
    with ProcessPoolExecutor(
        max_workers=min(cfg.workers, len(todo)),
        mp_context=_worker_context(),
        initializer=_init_worker,
        initargs=(target, reconstructor.facts, cfg, reconstructor.chat),
    ) as pool:
        for _ in pool.map(_worker_shard, todo, [plan] * len(todo), [out_dir] * len(todo)):
            done += 1
            reporter.progress(STAGE, done, total_shards, unit="shards")


_WORKER: Reconstructor | None = None


def _worker_context():
    """fork when this process runs one thread (the CLI): workers start at once, modules loaded.
    Otherwise (a Prefect worker has threads; forking them can deadlock) a forkserver that
    imports transformers once and forks the workers from that clean process: spawning each
    worker would re-import torch + transformers (~7 s apiece on a busy 2-core machine)."""
    import multiprocessing
    import threading

    if threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["eagle3_core.rebuild.build", "transformers"])
    return context


def _init_worker(target: TargetConfig, facts: TokenFacts, cfg: ReconstructConfig, chat: ChatSettings) -> None:
    """One tokenizer per worker, its Rust encoder on one thread: N workers use N cores, not N x all."""
    global _WORKER
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _WORKER = Reconstructor(load_tokenizer(target.path, target.trust_remote_code), facts, cfg, chat, target)


def _worker_shard(job: ShardJob, plan: InputPlan, out_dir: Path) -> str:
    assert _WORKER is not None, "worker used before its initializer ran"
    run_shard(job, plan, out_dir, _WORKER)
    return job.name


def summarize(
    manifest: StageManifest,
    stats: list[dict[str, Any]],
    facts: TokenFacts,
    cfg: ReconstructConfig,
    target: TargetConfig,
    out_dir: Path,
) -> Rejects:
    """Sum the shard stats into the manifest; no sequence at all is an error (the run then fails)."""
    counts: Counter = Counter()
    mismatches: list[dict[str, Any]] = []
    rejects = Rejects()
    for shard in stats:
        counts.update({k: v for k, v in shard["counts"].items() if not k.startswith("reject")})
        for reject in shard["rejects"]:
            rejects.add(reject["reason"])
        mismatches += shard["mismatches"]
    manifest.counts = {k: int(v) for k, v in sorted(counts.items())}
    manifest.details = ReconstructDetails(
        server_check=server_check(counts, cfg.prefer),
        mismatches=mismatches[:MANIFEST_MISMATCHES],
        token_ids=facts.as_dict(),
        family=target.family,
        prefer=cfg.prefer,
        max_length=cfg.max_length,
        overlong=cfg.overlong,
        shards=len(stats),
    ).dump()
    if counts.get("sequences", 0) == 0:
        raise nothing_left(rejects, out_dir)
    return rejects


def nothing_left(rejects: Rejects, out_dir: Path) -> StageError:
    """The error of a run in which every generation was rejected, naming the top reasons."""
    top = ", ".join(f"{k}: {v}" for k, v in rejects.as_dict().items()) or "none"
    return StageError(
        f"reconstruct produced no sequences: every generation was rejected ({top})",
        fix="read the reasons in the shard stats under sequences/stats/; a recipe that does "
        "not match the generations (think tokens, template) rejects them all",
        path=str(out_dir),
    )
