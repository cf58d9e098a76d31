"""What a drafter is and where it comes from: the facts its tracking run and model card carry.

Read by the train stage before the trainer starts, from the config and the upstream manifests
(no figure is computed here). The data facts come from the stage folders of the drafter's run
directory (``generations/`` and ``sequences/`` beside ``drafter/``); a drafter trained outside a
run directory has ``None`` there, shown on its card as not recorded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from eagle3_core import __version__
from eagle3_core.contracts.details import GenerateDetails, ReconstructDetails
from eagle3_core.run.manifest import StageManifest, read_manifest
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.hidden_sources import source_for
from eagle3_core.stages.train.inputs import TrainInputs

HF_PREFIX = "hf:"  # generate's fingerprint of a hub dataset: hf:<name>:<split>:<max_samples>


def run_facts(cfg: TrainConfig, inputs: TrainInputs, out_dir: str | Path, config_hash: str) -> dict[str, Any]:
    """The run's facts: recipe and config hashes, versions, mode and engine, target and data."""
    run_dir = Path(out_dir).resolve().parent
    generations = read_manifest(run_dir / "generations")
    sequences = read_manifest(inputs.sequences_dir or run_dir / "sequences")
    return {
        "recipe_hash": cfg.tracking.recipe_hash,
        "train_config_hash": config_hash,
        "eagle3_version": __version__,
        "mode": inputs.mode,
        "hidden_state_engine": source_for(inputs.mode).hidden_state_engine(cfg, inputs),
        "target": target_name(cfg, inputs, generations),
        "target_path": inputs.target_path,  # the runs' record; the card leaves it out (it travels)
        "hub_repo": cfg.tracking.hub_repo,
        "data": data_facts(inputs, generations, sequences),
    }


def target_name(cfg: TrainConfig, inputs: TrainInputs, generations: StageManifest | None) -> str:
    """The target's hub name, never a path of this machine (the card travels): configured
    (``train.tracking.base_model``), else the first hub id (``org/name``) among the name generate's
    server gave it and its ``config.json``'s ``_name_or_path`` (older transformers wrote it, often a
    local path), else the first of them that is a name, else its folder's name."""
    from eagle3_core.drafter.card import is_local_path, portable_name

    served = GenerateDetails.of(generations).model if generations is not None else None
    named = [n for n in (served, config_name(inputs.target_path)) if n and not is_local_path(n)]
    hub_id = next((n for n in named if n.count("/") == 1), None)
    return (
        portable_name(cfg.tracking.base_model)
        or hub_id
        or next(iter(named), None)
        or Path(inputs.target_path).resolve().name
    )


def config_name(target_path: str) -> str | None:
    """``_name_or_path`` of the target's ``config.json`` (None when absent or unreadable)."""
    import json

    try:
        found = json.loads((Path(target_path) / "config.json").read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def data_facts(
    inputs: TrainInputs, generations: StageManifest | None, sequences: StageManifest | None
) -> dict[str, Any]:
    """Samples and tokens trained on, reasoning share, chat families, source, datasets, dates."""
    gen = GenerateDetails.of(generations) if generations is not None else GenerateDetails()
    accepted = generations.counts.get("accepted") if generations is not None else None
    with_reasoning = sum(n for where, n in (gen.reasoning_sources or {}).items() if where != "none")
    family = ReconstructDetails.of(sequences).family if sequences is not None else None
    return {
        "samples": inputs.samples,
        "tokens": inputs.tokens,
        "reasoning_share": round(with_reasoning / accepted, 4) if accepted else None,
        "families": [family] if family else [],
        "source": gen.source or ("served" if generations is not None else None),
        "served_model": gen.model,
        "datasets": datasets(generations),
        "generated": date_span(generations),
    }


def datasets(generations: StageManifest | None) -> list[str]:
    """Hub datasets the prompts came from (a local file is no dataset a hub can link)."""
    if generations is None:
        return []
    found = [v for k, v in generations.inputs.items() if k.startswith("prompts") and v.startswith(HF_PREFIX)]
    return sorted({v[len(HF_PREFIX) :].split(":")[0] for v in found})


def date_span(manifest: StageManifest | None) -> str | None:
    """``YYYY-MM-DD`` (or ``first to last``) of a stage's run, UTC."""
    if manifest is None:
        return None
    first, last = (time.strftime("%Y-%m-%d", time.gmtime(t)) for t in (manifest.created_at, manifest.updated_at))
    return first if first == last else f"{first} to {last}"
