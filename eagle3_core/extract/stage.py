"""The extract stage: sequences/ -> hidden/ (see CONTRIBUTING.md for the on-disk contract).

Three steps, so a flow can run one task per shard and the plain entry point stays a loop:

    plan = plan_extract(...)        # sizes, layers, shards, storage check; manifest `running`
    extract_shard(plan, cfg, target, shard.index)   # for each shard; a finished one is skipped
    finish_extract(plan)            # index.parquet, then manifest `complete`

Guarantees: a shard is finished iff ``shard-NNNNN.safetensors`` exists with the plan's shard
key in its header (atomic rename), so killing the run and starting again computes only the
missing shards, while a run with another config or other inputs (sequences/ rebuilt) starts
over; ``complete`` is written last; a complete manifest for the same config and inputs makes
``run_extract`` return without loading the target.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import Field

from eagle3_core.base import StrictModel
from eagle3_core.contracts import sequences
from eagle3_core.contracts.hidden import state_bytes_per_token
from eagle3_core.contracts.target import read_target_facts
from eagle3_core.errors import ConfigError
from eagle3_core.extract.config import ExtractConfig
from eagle3_core.extract.plan import ShardSpec, plan_shards
from eagle3_core.extract.storage import check_fits, online_command, storage_line
from eagle3_core.extract.target_facts import resolve_layers
from eagle3_core.fingerprint import model_fingerprint
from eagle3_core.lifecycle import StageLifecycle
from eagle3_core.manifest import StageManifest, input_fingerprint, runtime_versions
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.target import TargetConfig

ENGINE_DIR = ".vllm"  # in hidden/: the vLLM engine's log and its transient state files, not $TMPDIR

STAGE = "extract"


class ExtractPlan(StrictModel):
    """Everything a shard task needs: paths, sizes, layers and the shard list (no tensors)."""

    sequences_dir: str = Field(description="Input sequences/ folder.")
    out_dir: str = Field(description="Output hidden/ folder.")
    engine: str = Field(description="transformers or vllm.")
    layers: list[int] = Field(description="Auxiliary layer ids, vLLM counting.")
    hidden_size: int = Field(description="Target hidden size H.")
    num_hidden_layers: int = Field(description="Target decoder layers N.")
    vocab_size: int = Field(description="Target vocabulary size.")
    config_hash: str = Field(description="Hash of what decides the output bytes.")
    inputs: dict[str, str] = Field(description="Input fingerprints.")
    shards: list[ShardSpec] = Field(description="Every shard, finished or not.")
    complete: StageManifest | None = Field(None, description="Set when a complete manifest already covers this run.")
    started_at: float = Field(default_factory=time.time, description="When planning began.")


def plan_extract(
    cfg: ExtractConfig,
    target: TargetConfig,
    sequences_dir: str | Path,
    out_dir: str | Path,
    reporter: Reporter | None = None,
) -> ExtractPlan:
    """Plan the run, print the storage cost, refuse when it cannot fit; manifest -> running."""
    reporter = reporter or NullReporter()
    if cfg.mode == "online":
        raise ConfigError(
            "extract.mode is online: hidden states are computed inside training, not stored",
            fix="skip the extract stage, or set extract.mode: offline",
        )
    sequences.parts(sequences_dir)  # the input folder first: a wrong --input is not a layer error
    path = target.require_path()
    facts = read_target_facts(path)
    layers = resolve_layers(cfg.layers, target, facts.num_hidden_layers)
    config_hash = cfg.output_hash(str(Path(path).resolve()), layers)
    inputs = {"sequences": input_fingerprint(sequences_dir), "target": model_fingerprint(path)}
    plan = ExtractPlan(
        sequences_dir=str(sequences_dir),
        out_dir=str(out_dir),
        engine=cfg.engine,
        layers=layers,
        hidden_size=facts.hidden_size,
        num_hidden_layers=facts.num_hidden_layers,
        vocab_size=facts.vocab_size,
        config_hash=config_hash,
        inputs=inputs,
        shards=plan_shards(sequences_dir, cfg.shard_tokens, config_hash),
    )
    life = lifecycle(plan, reporter)
    plan.complete = life.open()
    if plan.complete is not None:
        return plan
    with life.guard():
        if life.keys_changed:
            clear_outputs(plan.out_dir)
        life.begin()  # before the storage check: a refusal then reads `failed`, never the cleared run's `complete`
        _check_storage(plan, cfg, path, reporter)
    return plan


def clear_outputs(out_dir: str | Path) -> None:
    """Remove what a run with another config or other inputs wrote: a shard's key names its samples
    and their lengths, not their tokens, so sequences rebuilt with the same lengths would match it."""
    for file in [*Path(out_dir).glob("shard-*.safetensors"), Path(out_dir) / "index.parquet"]:
        file.unlink(missing_ok=True)


def lifecycle(plan: ExtractPlan, reporter: Reporter | None = None) -> StageLifecycle:
    """The stage's lifecycle for ``plan``: the same keys and shards in the plan, shard and finish steps
    (the folder's lock, taken when planning, is per process and per folder, so finish can let it go)."""
    return StageLifecycle(
        STAGE,
        plan.out_dir,
        plan.config_hash,
        plan.inputs,
        shards=("shard-*.safetensors", "index.parquet"),
        versions=("torch", "transformers", "safetensors"),
        reporter=reporter,
    )


def guard_extract(plan: ExtractPlan):
    """Around the shard steps: an error records ``failed``, an interrupt leaves ``running``; either
    way the folder is let go (the finished shards stay for the resume)."""
    return lifecycle(plan).guard()


def _check_storage(plan: ExtractPlan, cfg: ExtractConfig, target_path: str, reporter: Reporter) -> None:
    from eagle3_core.extract.shard import shard_is_done

    left = sum(s.tokens for s in plan.shards if not shard_is_done(plan.out_dir, s))
    line, need, free = storage_line(left, plan.hidden_size, plan.out_dir)
    reporter.log(f"extract: {len(plan.shards)} shards, layers {plan.layers}, engine {plan.engine}; {line}")
    online = online_command(plan.sequences_dir, target_path, free, need, cfg.layers)
    check_fits(need, free, cfg.disk_headroom, plan.out_dir, online)


def extract_shard(
    plan: ExtractPlan, cfg: ExtractConfig, target: TargetConfig, index: int, reporter: Reporter | None = None
) -> dict[str, float]:
    """Compute one shard unless it is already finished; returns its figures (``skipped`` 0/1)."""
    from eagle3_core.extract.engines import get_engine
    from eagle3_core.extract.shard import shard_figures, shard_is_done, write_shard

    shard = plan.shards[index]
    if shard_is_done(plan.out_dir, shard):
        return {**shard_figures(plan.out_dir, shard), "skipped": 1, "seconds": 0.0}
    longest = max(s.longest for s in plan.shards)
    engine = get_engine(cfg, target, plan.layers, plan.num_hidden_layers, longest, Path(plan.out_dir) / ENGINE_DIR)
    figures = write_shard(engine, plan.sequences_dir, plan.out_dir, shard, plan.hidden_size, plan.layers)
    (reporter or NullReporter()).log(
        f"extract: {shard.name} {shard.tokens:,} tokens in {figures['seconds']:.1f} s "
        f"({shard.tokens / max(figures['seconds'], 1e-9):,.0f} tokens/s)"
    )
    return {**figures, "skipped": 0}


def finish_extract(plan: ExtractPlan, reporter: Reporter | None = None, reused: int = 0) -> StageManifest:
    """Write index.parquet and the complete manifest (after every shard is durable).

    ``reused``: shards an earlier run had finished (reported in details, not counts, so a
    resumed run fingerprints the same as an uninterrupted one).
    """
    from eagle3_core.extract.index import write_index
    from eagle3_core.extract.shard import shard_figures, shard_is_done

    missing = [s.name for s in plan.shards if not shard_is_done(plan.out_dir, s)]
    assert not missing, f"finish_extract before every shard was written: {missing[:5]}"
    figures = [shard_figures(plan.out_dir, s) for s in plan.shards]
    samples = write_index(plan.sequences_dir, plan.out_dir, plan.shards)
    tokens = sum(f["tokens"] for f in figures)
    computed = sum(f["computed_tokens"] for f in figures)
    written = sum((Path(plan.out_dir) / s.name).stat().st_size for s in plan.shards)
    life = lifecycle(plan, reporter)
    manifest = StageManifest(
        stage=STAGE,
        status="running",
        config_hash=plan.config_hash,
        inputs=plan.inputs,
        counts={
            "samples": samples,
            "tokens": tokens,
            "supervised_tokens": sum(f["supervised_tokens"] for f in figures),
            "shards": len(plan.shards),
            "computed_tokens": computed,
            "bytes": written,
        },
        timings={"extract": time.time() - plan.started_at},
        versions=runtime_versions("torch", "transformers", "safetensors"),
        details={
            "layers": plan.layers,
            "hidden_size": plan.hidden_size,
            "num_hidden_layers": plan.num_hidden_layers,
            "vocab_size": plan.vocab_size,
            "engine": plan.engine,
            "dtype": "bfloat16",
            "padding_share": round(1 - tokens / computed, 4) if computed else 0.0,
            "bytes_per_token": round(written / tokens, 1) if tokens else 0.0,
            "state_bytes_per_token": state_bytes_per_token(plan.hidden_size),
            "shards_reused": reused,
        },
    )
    manifest = life.complete(manifest)
    (reporter or NullReporter()).log(
        f"extract: {samples:,} samples, {tokens:,} tokens in {len(plan.shards)} shards, "
        f"padding {manifest.details['padding_share']:.1%}"
    )
    return manifest


def run_extract(
    cfg: ExtractConfig,
    target: TargetConfig,
    sequences_dir: str | Path,
    out_dir: str | Path,
    reporter: Reporter | None = None,
) -> StageManifest:
    """sequences/ -> hidden/, resuming from finished shards; see the module docstring."""
    from eagle3_core.extract.engines import release_engines

    reporter = reporter or NullReporter()
    plan = plan_extract(cfg, target, sequences_dir, out_dir, reporter)
    if plan.complete is not None:
        return plan.complete
    total, done, reused = sum(s.tokens for s in plan.shards), 0, 0
    try:
        with guard_extract(plan):
            for shard in plan.shards:
                figures = extract_shard(plan, cfg, target, shard.index, reporter)
                done, reused = done + shard.tokens, reused + int(figures["skipped"])
                reporter.progress(STAGE, done, total, shard=shard.index, skipped=int(figures["skipped"]))
    finally:
        release_engines()
    return finish_extract(plan, reporter, reused)
