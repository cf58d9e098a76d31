"""Refuse a drafter that was trained for another target, before any server starts.

A drafter exported for a different model loads in vLLM only to crash deep in a worker, or
worse, runs and accepts nothing. The check reads two ``config.json`` files and the safetensors
header (no tensor is loaded) and compares what must agree: the target's hidden size (the
drafter's ``fc`` reads three target states of that width and shares the target's embedding),
its vocabulary (``vocab_size``, ``t2d``, ``d2t``), and auxiliary layer ids that exist in it.

``check_draft_length`` refuses a k past the block a DFlash or DSpark export was trained for
(``drafter/kinds.py``, ``trained_k``): served past it, acceptance collapsed from 2.74 to 1.31 in a
vLLM user's report (vLLM PR #41834). EAGLE-3 has no block and drafts any k.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.contracts.header import tensors
from eagle3_core.contracts.target import language_config
from eagle3_core.drafter.kinds import KINDS, aux_layer_ids, block_kind, trained_k
from eagle3_core.errors import ConfigError, InputError

if TYPE_CHECKING:
    from eagle3_core.stages.evaluate.config import EvaluateConfig

REQUIRED_TENSORS = ("fc.weight", "norm.weight", "lm_head.weight")


@dataclass(frozen=True)
class DrafterInfo:
    """What the evaluation needs to know about an exported drafter."""

    export_dir: Path
    hidden_size: int
    target_hidden_size: int
    vocab_size: int
    draft_vocab_size: int
    aux_layer_ids: list[int]


def read_config(model_dir: str | Path, what: str) -> dict:
    path = Path(model_dir) / "config.json"
    if not path.exists():
        raise InputError(
            f"{what} has no config.json", path=str(path), fix=f"point at a Hugging Face model directory for the {what}"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name -> shape from a safetensors header; no tensor read."""
    return {name: meta["shape"] for name, meta in tensors(path).items()}


def check_drafter(export_dir: str | Path, target_dir: str | Path) -> DrafterInfo:
    """The drafter's facts, or an ``InputError`` naming the first disagreement with the target."""
    export_dir = Path(export_dir)
    drafter, target = read_config(export_dir, "drafter export"), language_config(target_dir)
    architectures = drafter.get("architectures") or []
    if not any(kind.architecture in architectures for kind in KINDS.values()):
        raise InputError(
            f"drafter config.json does not declare {' or '.join(k.architecture for k in KINDS.values())} (architectures: {drafter.get('architectures')})",
            path=str(export_dir / "config.json"),
            fix="pass the drafter's export/ folder (drafter/export)",
        )
    info = DrafterInfo(
        export_dir=export_dir,
        hidden_size=int(drafter["hidden_size"]),
        target_hidden_size=int(drafter.get("target_hidden_size") or drafter["hidden_size"]),
        vocab_size=int(drafter["vocab_size"]),
        draft_vocab_size=int(drafter.get("draft_vocab_size") or drafter["vocab_size"]),
        aux_layer_ids=aux_layer_ids(drafter),  # as vLLM reads each kind's
    )
    _compare(info, target, target_dir)
    _check_tensors(info)
    return info


def check_draft_length(cfg: "EvaluateConfig", export_dir: str | Path) -> "EvaluateConfig":
    """``cfg`` with its k sweep resolved (``EvaluateConfig.sweep``), or a ``ConfigError`` naming the
    first field whose k drafts past the drafter's trained block. An export written before the block
    exports stated their k has it read from its ``block_size`` (``trained_k``); EAGLE-3 passes any k."""
    config = read_config(export_dir, "drafter export")
    kind, trained = block_kind(config), trained_k(config)
    sweep = cfg.sweep(trained)
    if trained is None:  # EAGLE-3: no block
        return cfg.model_copy(update={"k_sweep": sweep})
    k = cfg.num_speculative_tokens
    asked = (  # field, its value, the largest k in it, how to lower it
        ("num_speculative_tokens", k, k, f"`eagle3 evaluate -k {trained}`"),
        ("k_sweep", sweep, max(sweep, default=0), f"or leave it unset: 1 to {trained}"),
    )
    for field, value, largest, how in asked:
        if largest > trained:
            raise ConfigError(
                f"evaluate.{field} {value} drafts past the block this {kind.title} drafter was trained for "
                f"(block_size {config.get('block_size')}: at most k = {trained}); beyond it acceptance "
                "collapses (2.74 to 1.31 in vLLM PR #41834)",
                path=str(Path(export_dir) / "config.json"),
                fix=f"lower evaluate.{field} to at most {trained} ({how}), "
                f"or retrain with a larger train.{kind.name}.block_size",
            )
    return cfg.model_copy(update={"k_sweep": sweep})


def _mismatch(what: str, drafter_value: object, target_value: object, target_dir: str | Path) -> InputError:
    return InputError(
        f"drafter was trained for a different target: {what} is {drafter_value} in the drafter "
        f"but {target_value} in the target",
        path=str(target_dir),
        fix="evaluate the drafter against the target it was trained on, or retrain it for this target",
    )


def _compare(info: DrafterInfo, target: dict, target_dir: str | Path) -> None:
    if info.target_hidden_size != target["hidden_size"]:
        raise _mismatch("hidden size", info.target_hidden_size, target["hidden_size"], target_dir)
    if info.hidden_size != target["hidden_size"]:  # vLLM feeds the target's embeddings to the drafter
        raise _mismatch(
            "drafter hidden size (shared embedding width)", info.hidden_size, target["hidden_size"], target_dir
        )
    if info.vocab_size != target["vocab_size"]:
        raise _mismatch("vocab size", info.vocab_size, target["vocab_size"], target_dir)
    if len(info.aux_layer_ids) != 3:
        raise InputError(
            f"drafter config.json names {len(info.aux_layer_ids)} auxiliary layers "
            f"({info.aux_layer_ids}), expected 3 in eagle_aux_hidden_state_layer_ids",
            path=str(info.export_dir / "config.json"),
            fix="re-export the drafter: without the ids vLLM picks its own layers and acceptance collapses",
        )
    layers = int(target["num_hidden_layers"])
    if any(not 0 <= i <= layers for i in info.aux_layer_ids):
        raise _mismatch(
            f"auxiliary layer ids (the target has {layers} layers)",
            info.aux_layer_ids,
            f"ids within 0..{layers}",
            target_dir,
        )


def _check_tensors(info: DrafterInfo) -> None:
    path = info.export_dir / "model.safetensors"
    if not path.exists():
        raise InputError("drafter export has no model.safetensors", path=str(path), fix="re-run `eagle3 train`")
    shapes = safetensors_shapes(path)
    # a full-vocabulary draft ships no d2t (its lm_head rows are in target order): nothing to map
    reduced = info.draft_vocab_size != info.vocab_size
    missing = [name for name in REQUIRED_TENSORS + (("d2t",) if reduced else ()) if name not in shapes]
    if missing:
        raise InputError(f"drafter weights lack {missing}", path=str(path), fix="re-export the drafter")
    expected = {
        "fc.weight": [info.hidden_size, 3 * info.target_hidden_size],
        "lm_head.weight": [info.draft_vocab_size, info.hidden_size],
        "d2t": [info.draft_vocab_size],
    }
    for name, shape in expected.items():
        if name in shapes and list(shapes[name]) != shape:
            raise InputError(
                f"drafter tensor {name} has shape {shapes[name]}, its config.json implies {shape}",
                path=str(path),
                fix="re-export the drafter",
            )
