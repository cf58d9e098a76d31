"""drafter/export/: the serving checkpoint vLLM and SGLang load as ``LlamaForCausalLMEagle3``.

``config.json`` + ``model.safetensors`` (``fc.weight``, ``midlayer.*``, ``norm.weight``,
``lm_head.weight`` in bf16, ``d2t`` int64, ``t2d`` bool unless the draft vocab is the full one;
the embedding only when asked or served with pipeline parallelism, else the engine shares the
target's). Written into ``export.tmp/`` and renamed over ``export/``, so a reader never sees a
half-written export.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.drafter.model import Eagle3Drafter
from eagle3_core.run.fsio import remove_tree


def export_drafter(drafter: Eagle3Drafter, export_dir: str | Path, with_embedding: bool = False) -> Path:
    final = Path(export_dir)
    tmp = final.with_name(final.name + ".tmp")
    remove_tree(tmp)
    drafter.save_export(tmp, with_embedding)
    remove_tree(final)  # a symlinked export/ goes as a link: the folder it points to is another run's
    tmp.rename(final)
    return final


def full_state(engine) -> dict:
    """The module's full weights on rank 0, also under ZeRO-3 (where parameters are partitioned)."""
    if engine.zero_optimization_stage() == 3:
        return engine._zero3_consolidated_16bit_state_dict()
    return engine.module.state_dict()
