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
from eagle3_core.manifest import (StageManifest, input_fingerprint, read_manifest, runtime_versions,
                                  write_manifest)
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.reconstruct.build import Reconstructor
from eagle3_core.reconstruct.chat import recorded_chat
from eagle3_core.reconstruct.config import ReconstructConfig
from eagle3_core.reconstruct.shards import (InputPlan, ShardJob, load_stats, plan_inputs, plan_shards,
                                            run_shard, shard_done)
from eagle3_core.reconstruct.tokenizer import TokenFacts, load_tokenizer, token_facts
from eagle3_core.target import ChatSettings, TargetConfig

STAGE = "reconstruct"
MANIFEST_MISMATCHES = 100  # the manifest shows the first ones; the shard stats keep them all


def run_reconstruct(cfg: ReconstructConfig, target: TargetConfig, generations_dir: str | Path,
                    out_dir: str | Path, reporter: Reporter | None = None) -> StageManifest:
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
    config_hash = stable_hash({"reconstruct": cfg.output_hash(), "target": target_tokens(target),
                               "chat": chat.model_dump(mode="json")})
    out_dir = Path(out_dir)
    previous = read_manifest(out_dir)
    if previous is not None and previous.is_complete_for(config_hash, inputs):
        reporter.log(f"reconstruct: complete for these inputs, skipped ({previous.counts.get('sequences', 0)} sequences)")
        return previous
    if previous is not None and (previous.config_hash != config_hash or previous.inputs != inputs):
        clear_outputs(out_dir)
    manifest = StageManifest(stage=STAGE, status="running", config_hash=config_hash, inputs=inputs,
                             versions=runtime_versions("transformers", "tokenizers", "pyarrow"))
    write_manifest(out_dir, manifest)
    jobs = plan_shards(plan.total, cfg.shard_rows)
    todo = [job for job in jobs if not shard_done(out_dir, job)]
    reporter.log(f"reconstruct: {plan.total} generations in {len(jobs)} shards, {len(jobs) - len(todo)} already done")
    run_jobs(todo, plan, out_dir, Reconstructor(tokenizer, facts, cfg, chat), target, reporter, len(jobs))
    return finish(manifest, [load_stats(out_dir, job) for job in jobs], facts, cfg, target, out_dir,
                  time.monotonic() - started)


def target_tokens(target: TargetConfig) -> dict[str, Any]:
    """The parts of the target that decide the layout (not where it lives)."""
    return target.model_dump(mode="json", include={"family", "think_open", "think_close", "end_of_turn"})


def clear_outputs(out_dir: Path) -> None:
    """Remove shards made with another config, tokenizer or input: they must not mix."""
    for file in [*out_dir.glob("part-*.parquet"), *(out_dir / "stats").glob("part-*.json")]:
        file.unlink()


def run_jobs(todo: list[ShardJob], plan: InputPlan, out_dir: Path, reconstructor: Reconstructor,
             target: TargetConfig, reporter: Reporter, total_shards: int) -> None:
    """Run the shards left, in this process or in ``cfg.workers`` processes."""
    done = total_shards - len(todo)
    cfg = reconstructor.cfg
    if cfg.workers == 1 or len(todo) <= 1:
        for job in todo:
            run_shard(job, plan, out_dir, reconstructor)
            done += 1
            reporter.progress(STAGE, done, total_shards, unit="shards")
        return
    with ProcessPoolExecutor(max_workers=min(cfg.workers, len(todo)), mp_context=_worker_context(),
                             initializer=_init_worker,
                             initargs=(target, reconstructor.facts, cfg, reconstructor.chat)) as pool:
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
    _WORKER = Reconstructor(load_tokenizer(target.path, target.trust_remote_code), facts, cfg, chat)


def _worker_shard(job: ShardJob, plan: InputPlan, out_dir: Path) -> str:
    assert _WORKER is not None, "worker used before its initializer ran"
    run_shard(job, plan, out_dir, _WORKER)
    return job.name


def finish(manifest: StageManifest, stats: list[dict[str, Any]], facts: TokenFacts, cfg: ReconstructConfig,
           target: TargetConfig, out_dir: Path, seconds: float) -> StageManifest:
    """Sum the shard stats into the manifest; mark it complete (or failed when nothing is left)."""
    counts: Counter = Counter()
    mismatches: list[dict[str, Any]] = []
    for shard in stats:
        counts.update(shard["counts"])
        mismatches += shard["mismatches"]
    reasons = {k.split(":", 1)[1]: v for k, v in sorted(counts.items()) if k.startswith("reject:")}
    checked = counts.get("server_checked", 0)
    manifest.counts = {k: int(v) for k, v in sorted(counts.items()) if not k.startswith("reject:")}
    manifest.counts.setdefault("rejected", 0)
    manifest.timings = {"total": round(seconds, 3)}
    manifest.details = {
        "reject_reasons": reasons,
        "server_check": {"checked": checked, "matched": counts.get("server_matched", 0),
                         "match_rate": round(counts.get("server_matched", 0) / checked, 6) if checked else None},
        "mismatches": mismatches[:MANIFEST_MISMATCHES],
        "token_ids": facts.as_dict(), "family": target.family, "prefer": cfg.prefer,
        "max_length": cfg.max_length, "overlong": cfg.overlong, "shards": len(stats)}
    if counts.get("sequences", 0) == 0:
        manifest.status = "failed"
        write_manifest(out_dir, manifest)
        top = ", ".join(f"{k}: {v}" for k, v in reasons.items()) or "none"
        raise StageError(f"reconstruct produced no sequences: every generation was rejected ({top})",
                         fix="read the reasons in the shard stats under sequences/stats/; a recipe that does "
                             "not match the generations (think tokens, template) rejects them all",
                         path=str(out_dir))
    manifest.status = "complete"
    write_manifest(out_dir, manifest)
    return manifest
