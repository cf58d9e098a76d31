"""`run_reconstruct`: generations/ -> sequences/ (token ids with think tokens in place, loss mask).

Guarantees:
- every accepted generation ends as a row or a counted reject (``counts.rejected``, per reason
  in ``details.reject_reasons``, each with its sample id in ``stats/part-*.json``);
- where a record holds the server's token ids, the rebuilt sequence is compared with them:
  ``details.server_check`` (checked, matched, match_rate) and ``details.mismatches`` (first
  differing position of each, the first 100; all of them in the shard stats);
- the tokenizer's special ids are verified against the recipe before any work, and so are the
  chat settings generate recorded (``chat.recorded_chat``): prompts render with those;
- resumable per shard (see ``shards``); a complete manifest for the same config, tokenizer and
  generations returns at once; a changed one starts over.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from eagle3_core.base import stable_hash
from eagle3_core.errors import ConfigError, StageError
from eagle3_core.fsio import remove_tree
from eagle3_core.lifecycle import StageLifecycle
from eagle3_core.manifest import StageManifest, input_fingerprint
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.reconstruct.build import Reconstructor
from eagle3_core.reconstruct.chat import recorded_chat
from eagle3_core.reconstruct.config import ReconstructConfig
from eagle3_core.reconstruct.shards import (
    InputPlan,
    ShardJob,
    load_stats,
    plan_inputs,
    plan_shards,
    run_shard,
    shard_done,
)
from eagle3_core.reconstruct.tokenizer import TokenFacts, load_tokenizer, token_facts
from eagle3_core.rejects import Rejects
from eagle3_core.target import ChatSettings, TargetConfig

STAGE = "reconstruct"
MANIFEST_MISMATCHES = 100  # the manifest shows the first ones; the shard stats keep them all


def run_reconstruct(
    cfg: ReconstructConfig,
    target: TargetConfig,
    generations_dir: str | Path,
    out_dir: str | Path,
    reporter: Reporter | None = None,
) -> StageManifest:
    """Rebuild every accepted generation as ids + loss mask under ``out_dir`` (the sequences/ folder)."""
    reporter = reporter or NullReporter()
    started = time.monotonic()
    if not target.path:
        raise ConfigError("no tokenizer: target.path is not set", fix="pass --tokenizer PATH (a local directory)")
    tokenizer = load_tokenizer(target.path, target.trust_remote_code)
    facts = token_facts(tokenizer, target, target.path)
    plan = plan_inputs(generations_dir)
    chat = recorded_chat(generations_dir, target)
    inputs = {"generations": input_fingerprint(generations_dir), "tokenizer": facts.fingerprint}
    config_hash = stable_hash(
        {"reconstruct": cfg.output_hash(), "target": target_tokens(target), "chat": chat.model_dump(mode="json")}
    )
    out_dir = Path(out_dir)
    life = StageLifecycle(
        STAGE,
        out_dir,
        config_hash,
        inputs,
        shards=("part-*.parquet",),
        versions=("transformers", "tokenizers", "pyarrow"),
        reporter=reporter,
    )
    previous = life.open()
    if previous is not None:
        return previous
    with life.guard():
        if life.keys_changed:
            clear_outputs(out_dir)
        manifest = life.begin()
        jobs = plan_shards(plan.total, cfg.shard_rows)
        todo = [job for job in jobs if not shard_done(out_dir, job)]
        reporter.log(
            f"reconstruct: {plan.total} generations in {len(jobs)} shards, {len(jobs) - len(todo)} already done"
        )
        run_jobs(todo, plan, out_dir, Reconstructor(tokenizer, facts, cfg, chat, target), target, reporter, len(jobs))
        return finish(
            life, manifest, [load_stats(out_dir, job) for job in jobs], facts, cfg, target, time.monotonic() - started
        )


def target_tokens(target: TargetConfig) -> dict[str, Any]:
    """The parts of the target that decide the layout (not where it lives, nor its template's provenance)."""
    return target.model_dump(
        mode="json", exclude={"path", "trust_remote_code", "chat", "aux_layer_ids", "template_version"}
    )


def clear_outputs(out_dir: Path) -> None:
    """Remove shards made with another config, tokenizer or input: they must not mix. ``stats/``
    holds nothing else, and goes whole (as a link when it is one: its target is not ours to empty)."""
    remove_tree(out_dir / "stats")
    for file in out_dir.glob("part-*.parquet"):
        file.unlink()


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
    context.set_forkserver_preload(["eagle3_core.reconstruct.build", "transformers"])
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


def finish(
    life: StageLifecycle,
    manifest: StageManifest,
    stats: list[dict[str, Any]],
    facts: TokenFacts,
    cfg: ReconstructConfig,
    target: TargetConfig,
    seconds: float,
) -> StageManifest:
    """Sum the shard stats into the manifest; mark it complete (or failed when nothing is left)."""
    counts: Counter = Counter()
    mismatches: list[dict[str, Any]] = []
    rejects = Rejects()
    for shard in stats:
        counts.update({k: v for k, v in shard["counts"].items() if not k.startswith("reject")})
        for reject in shard["rejects"]:
            rejects.add(reject["reason"])
        mismatches += shard["mismatches"]
    checked = counts.get("server_checked", 0)
    manifest.counts = {k: int(v) for k, v in sorted(counts.items())}
    manifest.timings = {"total": round(seconds, 3)}
    manifest.details = {
        "server_check": {
            "checked": checked,
            "matched": counts.get("server_matched", 0),
            "match_rate": round(counts.get("server_matched", 0) / checked, 6) if checked else None,
        },
        "mismatches": mismatches[:MANIFEST_MISMATCHES],
        "token_ids": facts.as_dict(),
        "family": target.family,
        "prefer": cfg.prefer,
        "max_length": cfg.max_length,
        "overlong": cfg.overlong,
        "shards": len(stats),
    }
    if counts.get("sequences", 0) == 0:
        top = ", ".join(f"{k}: {v}" for k, v in rejects.as_dict().items()) or "none"
        raise StageError(
            f"reconstruct produced no sequences: every generation was rejected ({top})",
            fix="read the reasons in the shard stats under sequences/stats/; a recipe that does "
            "not match the generations (think tokens, template) rejects them all",
            path=str(life.out_dir),
        )
    return life.complete(manifest, rejects)
