"""Thinking on and off: the same drafter, prompts and servers, with the target's switch set each way.

Thinking changes what a drafter sees: with it on, most output is reasoning; off, the answer alone.
A drafter trained on thinking traces can collapse without them, and one figure hides it. So where
the target has a switch (``target.thinking``) evaluate sends the held-out prompts once per mode
(``evaluate.thinking``, both by default) to the servers it already runs: no extra server start,
one more pass per server and mode. The mode the recipe's own chat settings ask for reuses the pass
the report's headline figures come from.

Which mode the drafter was trained in is read from what generate recorded (the generations
manifest's chat settings), else the recipe's: ``on``, ``off``, or ``model decides`` (a hybrid's
switch left unset).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.target.config import ChatSettings, TargetConfig

STATES = {True: "on", False: "off", None: "model decides"}


@dataclass(frozen=True)
class Mode:
    name: str  # "on" or "off"
    chat: ChatSettings  # the recipe's chat settings with the switch set for this mode


def thinking_modes(cfg: EvaluateConfig, target: TargetConfig) -> list[Mode]:
    """The modes to measure: ``evaluate.thinking``, else both where the target has a switch, else none (the
    recipe's chat settings alone, as the headline figures are measured)."""
    asked = cfg.thinking if cfg.thinking is not None else (["on", "off"] if target.thinking else [])
    return [Mode(name, target.chat_thinking(name == "on")) for name in asked]


def trained_in(target: TargetConfig, generations_dir: str | Path | None) -> str:
    """The mode the drafter's data was generated in: generate's recorded chat settings (the generations
    manifest's, read through its contract), else the recipe's."""
    from eagle3_core.contracts.details import GenerateDetails
    from eagle3_core.run.manifest import read_manifest

    manifest = read_manifest(generations_dir) if generations_dir else None
    recorded = GenerateDetails.of(manifest).chat if manifest is not None else None
    chat = ChatSettings.model_validate(recorded) if recorded else target.chat
    return STATES[target.thinking_state(chat)]


def mode_block(mode: Mode, online: dict, per_request: dict | None) -> dict:
    """One mode's figures, in the shape of ``online``'s: acceptance, speed, lossless, vLLM's own steps."""
    with_drafter = online["with_drafter"]
    return {
        "chat_template_kwargs": mode.chat.chat_template_kwargs,
        "acceptance_length": with_drafter["acceptance_length"],
        "acceptance_per_position": with_drafter["acceptance_per_position"],
        "drafts": with_drafter["drafts"],
        "output_tokens": with_drafter["output_tokens"],
        "output_tokens_per_s": with_drafter["output_tokens_per_s"],
        "speedup": online["speedup"],
        "speedup_error": online["speedup_error"],
        "lossless": online["lossless"],
        "per_request": per_request,
    }


def thinking_block(switch: str, trained: str, modes: dict[str, dict]) -> dict:
    """report.json's ``thinking``: the switch, the mode trained in, and each measured mode's figures."""
    return {"switch": switch, "trained_in": trained, "modes": modes}
