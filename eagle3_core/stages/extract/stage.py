"""The extract stage: sequences/ -> hidden/ (see docs/stages/extract.md for the on-disk contract).

``ExtractStage`` has one unit per shard, so a flow runs one task per shard and ``run_extract`` is
a loop (``driver.drive``): ``keys`` reads the target's facts and plans the shards, ``plan``
prints the storage cost and refuses a run whose states cannot fit the disk, or whose target cannot fit
the transformers engine's device (``states.target_size``, before any load: one line naming
``extract.engine: vllm``), ``run(index)`` computes one shard
(a finished one is skipped), ``finish`` writes index.parquet and the manifest's figures.

Guarantees: a shard is finished iff ``shard-NNNNN.safetensors`` exists with the plan's shard
key in its header (atomic rename), so killing the run and starting again computes only the
missing shards, while a run with another config or other inputs (sequences/ rebuilt) starts
over (a shard's key names its samples and their lengths, not their tokens, so sequences rebuilt
with the same lengths would match it: the driver clears them); ``complete`` is written last; a
complete manifest for the same config and inputs returns without loading the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from eagle3_core.base import StrictModel
from eagle3_core.contracts import sequences
from eagle3_core.contracts.details import ExtractDetails
from eagle3_core.contracts.hidden import state_bytes_per_token
from eagle3_core.contracts.target import read_target_facts
from eagle3_core.run.driver import Stage, drive
from eagle3_core.run.keys import stage_key
from eagle3_core.run.manifest import StageManifest, input_fingerprint
from eagle3_core.run.progress import NullReporter, Reporter
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.extract.plan import ShardSpec, plan_shards
from eagle3_core.stages.extract.target_facts import resolve_layers
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.fingerprint import model_fingerprint
from eagle3_core.target.storage import check_fits, online_command, storage_line

ENGINE_DIR = ".vllm"  # in hidden/: the vLLM engine's log and its transient state files, not $TMPDIR

STAGE = "extract"
KEY_VERSION = 1  # run.keys: bumped when what decides hidden/'s bytes changes on purpose


class ExtractPlan(StrictModel):
    """Everything a shard needs: paths, sizes, layers and the shard list (no tensors)."""

    sequences_dir: str = Field(description="Input sequences/ folder.")
    out_dir: str = Field(description="Output hidden/ folder.")
    engine: str = Field(description="transformers or vllm.")
    layers: list[int] = Field(description="Auxiliary layer ids, vLLM counting.")
    hidden_size: int = Field(description="Target hidden size H.")
    num_hidden_layers: int = Field(description="Target decoder layers N.")
    vocab_size: int = Field(description="Target vocabulary size.")
    config_hash: str = Field(description="Hash of what decides the output bytes.")
    shards: list[ShardSpec] = Field(description="Every shard, finished or not.")


def plan_extract(
    cfg: ExtractConfig, target: TargetConfig, sequences_dir: str | Path, out_dir: str | Path
) -> ExtractPlan:
    """Sizes, layers and shards, from the target's config.json and the sequences (nothing written)."""
    sequences.parts(sequences_dir)  # the input folder first: a wrong --input is not a layer error
    path = target.require_path()
    facts = read_target_facts(path)
    layers = resolve_layers(cfg.layers, target, facts.num_hidden_layers)
    # the layers as resolved (unset, the target's): the target itself is keyed by its bytes (keys), not its path
    config_hash = stage_key(STAGE, KEY_VERSION, extract=cfg.model_copy(update={"layers": layers}))
    return ExtractPlan(
        sequences_dir=str(sequences_dir),
        out_dir=str(out_dir),
        engine=cfg.engine,
        layers=layers,
        hidden_size=facts.hidden_size,
        num_hidden_layers=facts.num_hidden_layers,
        vocab_size=facts.vocab_size,
        config_hash=config_hash,
        shards=plan_shards(sequences_dir, cfg.shard_tokens, config_hash),
    )


@dataclass
class ExtractStage(Stage):
    """The target's low/mid/high and final hidden states for every token, resumable per shard."""

    name, shards, key_version = STAGE, ("shard-*.safetensors", "index.parquet"), KEY_VERSION
    versions = ("torch", "transformers", "safetensors")

    cfg: ExtractConfig
    target: TargetConfig
    sequences_dir: str
    out_dir: str
    reporter: Reporter | None = None
    rows: list[dict] = field(default_factory=list, init=False)  # per shard: tokens, reused, padding, speed

    def keys(self) -> tuple[str, dict[str, str]]:
        self.extract_plan = plan_extract(self.cfg, self.target, self.sequences_dir, self.out_dir)
        target = model_fingerprint(self.target.require_path())
        return self.extract_plan.config_hash, {"sequences": input_fingerprint(self.sequences_dir), "target": target}

    def plan(self) -> list[int]:
        """Every shard (a finished one is skipped by ``run``), once the storage left fits."""
        from eagle3_core.stages.extract.shard import shard_is_done

        plan = self.extract_plan
        left = sum(s.tokens for s in plan.shards if not shard_is_done(plan.out_dir, s))
        line, need, free = storage_line(left, plan.hidden_size, plan.out_dir)
        self.reporter.log(f"extract: {len(plan.shards)} shards, layers {plan.layers}, engine {plan.engine}; {line}")
        command = online_command(plan.sequences_dir, self.target.require_path(), free, need, self.cfg.layers)
        check_fits(need, free, self.cfg.disk_headroom, plan.out_dir, command)
        if plan.engine == "transformers":
            check_engine_memory(self.cfg, self.target)
        return [shard.index for shard in plan.shards]

    def run(self, index: int) -> None:
        figures = extract_shard(self.extract_plan, self.cfg, self.target, index, self.reporter)
        self.rows.append(shard_row(self.extract_plan.shards[index].name, figures))

    def finish(self, manifest: StageManifest) -> None:
        reused = sum(int(row["reused"]) for row in self.rows)
        manifest.counts, manifest.details = finish_extract(self.extract_plan, self.reporter, reused)

    def close(self) -> None:
        """Free the cached target (GPU memory, a vLLM worker)."""
        from eagle3_core.stages.extract.engine_cache import release_engines

        release_engines()


def check_engine_memory(cfg: ExtractConfig, target: TargetConfig) -> None:
    """The transformers engine holds the whole target in this process: sized from its config.json
    before any load, so a target too large is one line naming the vLLM engine, not exit 137."""
    from eagle3_core.states.target_size import check_target_fits
    from eagle3_core.target.hardware import resolve_device

    check_target_fits(
        target.require_path(),
        resolve_device(cfg.device),
        None,
        what="extract's transformers engine",
        fix="set extract.engine: vllm (`eagle3 extract --engine vllm`): vLLM serves a target over all the "
        "machine's GPUs; or run extract where the target fits",
    )


def run_extract(*args, **kwargs) -> StageManifest:
    """The stage whole in this process (tests, benchmarks): ``drive(ExtractStage(...))``."""
    return drive(ExtractStage(*args, **kwargs))


def shard_row(name: str, figures: dict[str, float]) -> dict:
    padded = figures["computed_tokens"] or 1
    return {
        "shard": name,
        "tokens": int(figures["tokens"]),
        "reused": bool(figures["skipped"]),
        "padding_share": round(1 - figures["tokens"] / padded, 4),
        "tokens_per_s": None if figures["skipped"] else round(figures["tokens"] / max(figures["seconds"], 1e-9)),
    }


def extract_shard(
    plan: ExtractPlan, cfg: ExtractConfig, target: TargetConfig, index: int, reporter: Reporter | None = None
) -> dict[str, float]:
    """Compute one shard unless it is already finished; returns its figures (``skipped`` 0/1)."""
    from eagle3_core.stages.extract.engine_cache import get_engine
    from eagle3_core.stages.extract.shard import shard_figures, shard_is_done, write_shard

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


def finish_extract(plan: ExtractPlan, reporter: Reporter, reused: int = 0) -> tuple[dict, dict]:
    """Write index.parquet (after every shard is durable); the manifest's counts and details.

    ``reused``: shards an earlier run had finished (reported in details, not counts, so a
    resumed run fingerprints the same as an uninterrupted one).
    """
    from eagle3_core.stages.extract.index import write_index
    from eagle3_core.stages.extract.shard import shard_figures, shard_is_done

    missing = [s.name for s in plan.shards if not shard_is_done(plan.out_dir, s)]
    assert not missing, f"finish_extract before every shard was written: {missing[:5]}"
    figures = [shard_figures(plan.out_dir, s) for s in plan.shards]
    samples = write_index(plan.sequences_dir, plan.out_dir, plan.shards)
    tokens = sum(f["tokens"] for f in figures)
    computed = sum(f["computed_tokens"] for f in figures)
    written = sum((Path(plan.out_dir) / s.name).stat().st_size for s in plan.shards)
    counts = {
        "samples": samples,
        "tokens": tokens,
        "supervised_tokens": sum(f["supervised_tokens"] for f in figures),
        "shards": len(plan.shards),
        "computed_tokens": computed,
        "bytes": written,
    }
    details = ExtractDetails(
        **plan_details(plan),
        padding_share=round(1 - tokens / computed, 4) if computed else 0.0,
        bytes_per_token=round(written / tokens, 1) if tokens else 0.0,
        state_bytes_per_token=state_bytes_per_token(plan.hidden_size),
        shards_reused=reused,
    )
    reporter.log(
        f"extract: {samples:,} samples, {tokens:,} tokens in {len(plan.shards)} shards, "
        f"padding {details.padding_share:.1%}"
    )
    return counts, details.dump()


def plan_details(plan: ExtractPlan) -> dict:
    """What hidden/ holds, for its readers: layers, shapes, engine, dtype."""
    return {
        "layers": plan.layers,
        "hidden_size": plan.hidden_size,
        "num_hidden_layers": plan.num_hidden_layers,
        "vocab_size": plan.vocab_size,
        "engine": plan.engine,
        "dtype": "bfloat16",
    }
