"""Drafter kinds, declared once: what each kind is called, how vLLM loads it, and where it trains.

The data (sequences/, vocab/, hidden/ or the online spool) is the same for every kind. A kind is
its model module (here in ``drafter/``) and its training module (``train/kind_<name>.py``: build,
loss, export, the ``TRAINING`` hooks), named here; training, evaluation and the model card read
this table and nothing else, so a new kind is its modules plus one line below (CONTRIBUTING.md,
"A drafter kind"). Light on purpose: no torch import, so the card and the config read it.

``block`` kinds propose k tokens in one forward pass from a block of ``block_size`` slots (the
anchor and ``block_size - 1`` masks): vLLM's ``num_speculative_tokens`` is ``block_size - 1`` for
DFlash, whose anchor slot predicts nothing, and ``block_size`` for DSpark, whose anchor slot predicts
the first draft (``sample_from_anchor``). A block export states the k it was trained for
(``TRAINED_K``, ``trained_k``): drafting past the block collapsed acceptance from 2.74 to 1.31 in a
vLLM user's report (vLLM PR #41834), so evaluate refuses a larger k and the model card launches this one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class DrafterKind:
    name: str
    architecture: str  # the export's config.json ``architectures[0]``
    vllm_method: str  # vLLM's --speculative-config ``method``
    training: str  # module with the kind's ``TRAINING`` hooks (imported by the trainer only)
    model: str  # ``module:Class`` of its drafter, with ``from_export`` (evaluate's offline loop loads it)
    block: bool  # drafts a whole block in one pass (k = block_size - 1)
    title: str  # the method's name on the model card
    paper: str


KINDS: dict[str, DrafterKind] = {
    "eagle3": DrafterKind(
        "eagle3",
        "LlamaForCausalLMEagle3",
        "eagle3",
        "eagle3_core.stages.train.kind_eagle3",
        "eagle3_core.drafter.model:Eagle3Drafter",
        False,
        "EAGLE-3",
        "arXiv 2503.01840",
    ),
    "dflash": DrafterKind(
        "dflash",
        "DFlashDraftModel",
        "dflash",
        "eagle3_core.stages.train.kind_dflash",
        "eagle3_core.drafter.dflash:DFlashDrafter",
        True,
        "DFlash",
        "arXiv 2602.06036",
    ),
    "dspark": DrafterKind(
        "dspark",
        "Qwen3DSparkModel",
        "dspark",
        "eagle3_core.stages.train.kind_dspark",
        "eagle3_core.drafter.dspark:DSparkDrafter",
        True,
        "DSpark",
        "arXiv 2607.05147",
    ),
}

KindName = Literal[tuple(KINDS)]  # train.kind's choices


def kind_of_config(config: dict) -> DrafterKind:
    """The kind of an export's ``config.json`` (by its architecture)."""
    arch = (config.get("architectures") or [""])[0]
    for kind in KINDS.values():
        if kind.architecture == arch:
            return kind
    from eagle3_core.errors import InputError

    raise InputError(
        f"the drafter's architecture {arch!r} is none of eagle3's kinds ({', '.join(KINDS)})",
        fix="pass a drafter/export/ folder written by `eagle3 train`",
    )


def block_kind(config: dict) -> DrafterKind | None:
    """The block kind an export's ``config.json`` declares, or None (EAGLE-3, or no architecture)."""
    arch = (config.get("architectures") or [""])[0]
    return next((k for k in KINDS.values() if k.block and k.architecture == arch), None)


# A block export's config.json field: the most tokens it drafts, as trained (DFlash block_size - 1,
# DSpark block_size). eagle3's own: vLLM 0.32 reads no such field for DFlash, and for DSpark only
# ``block_size``, as the default num_speculative_tokens (config/speculative.py, ``use_dspark()``).
TRAINED_K = "eagle3_num_speculative_tokens"


def trained_k(config: dict) -> int | None:
    """The k a block export was trained to draft; None for EAGLE-3 (no block: any k) or a block export
    without a ``block_size``. An export written before ``TRAINED_K`` existed keeps working: its k is
    read from its ``block_size`` as vLLM reads the block, the anchor's slot drafting only where
    ``sample_from_anchor`` is set (DSpark's top-level field; DFlash's ``dflash_config`` holds none)."""
    if block_kind(config) is None:
        return None
    if TRAINED_K in config:
        return int(config[TRAINED_K])
    if config.get("block_size") is None:
        return None
    anchor_drafts = config.get("sample_from_anchor", (config.get("dflash_config") or {}).get("sample_from_anchor"))
    return int(config["block_size"]) - 1 + bool(anchor_drafts)


def drafter_class(kind: DrafterKind):
    """The kind's drafter class (imports torch)."""
    import importlib

    module, name = kind.model.split(":")
    return getattr(importlib.import_module(module), name)


def aux_layer_ids(config: dict) -> list[int]:
    """The target layers an export reads, in eagle3's (vLLM's aux) numbering, found as vLLM 0.32 finds
    them (``get_eagle3_aux_layers_from_config``): EAGLE-3's ids, else DFlash's or DSpark's
    ``target_layer_ids`` (layer outputs from 0: plus 1)."""
    ids = config.get("eagle_aux_hidden_state_layer_ids")
    outputs = (config.get("dflash_config") or {}).get("target_layer_ids") or config.get("dspark_target_layer_ids")
    return list(ids or [k + 1 for k in outputs or []])


def kind_of_export(export_dir: str | Path) -> DrafterKind:
    return kind_of_config(json.loads((Path(export_dir) / "config.json").read_text()))
