"""The auxiliary layer ids extraction captures (the target's sizes are ``contracts.target``).

Layer ids are counted the way vLLM counts them: id k is the hidden state entering decoder
layer k, which is transformers' ``output_hidden_states[k]`` (k = 0 is the embedding output).
"""

from __future__ import annotations

from eagle3_core.errors import ConfigError
from eagle3_core.target.config import TargetConfig, aux_layer_problem, default_aux_layer_ids


def resolve_layers(requested: list[int] | None, target: TargetConfig, num_hidden_layers: int) -> list[int]:
    """cfg.layers, else target.aux_layer_ids, else (2, N//2, N-3); each in [0, N)."""
    layers = list(requested or target.aux_layer_ids or default_aux_layer_ids(num_hidden_layers))
    bad = [k for k in layers if not 0 <= k < num_hidden_layers]
    if bad:
        raise ConfigError(
            f"layer ids {bad} are outside 0..{num_hidden_layers - 1} for a {num_hidden_layers}-layer target",
            fix="pass --layers low,mid,high with ids below the number of decoder layers",
        )
    if len(set(layers)) != 3:
        raise ConfigError(
            f"the three auxiliary layers must differ, got {layers}",
            fix="the defaults (2, N//2, N-3) differ only from 7 decoder layers on: pass --layers low,mid,high explicitly",
        )
    problem = aux_layer_problem(layers, num_hidden_layers)
    if problem:
        raise ConfigError(f"auxiliary layers {problem}", fix="pass --layers low,mid,high, increasing")
    return layers
