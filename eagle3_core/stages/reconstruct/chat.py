"""The chat settings reconstruct renders with: the ones generate recorded, checked against the recipe.

Generate writes the settings it sent (``target.chat``: template variables, detokenizer flags)
into ``generations/manifest.json`` under ``details.chat``. Reconstruct renders every prompt with
those recorded values, and refuses to start when the recipe says otherwise: a prompt rendered
with thinking on for answers generated with thinking off is wrong in every row, silently.
Generations without a record (written by another tool) take the recipe's settings.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from eagle3_core.contracts.details import GenerateDetails
from eagle3_core.errors import ConfigError
from eagle3_core.run.manifest import read_manifest
from eagle3_core.target.config import ChatSettings, TargetConfig


def recorded_chat(generations_dir: str | Path, target: TargetConfig) -> ChatSettings:
    """The settings generate recorded (or the recipe's when none were); ConfigError on a mismatch."""
    manifest = read_manifest(generations_dir)
    recorded = GenerateDetails.of(manifest).chat if manifest is not None else None
    if recorded is None:
        return target.chat
    try:
        recorded = ChatSettings.model_validate(recorded)
    except ValidationError as exc:  # an older run's settings (chat_template_kwargs.reasoning_effort)
        raise ConfigError(
            f"the generations' recorded chat settings are refused now: {exc.errors()[0]['msg']}",
            fix="generate again with the recipe's target.chat (the server never applied what was recorded)",
            path=str(Path(generations_dir) / "manifest.json"),
        ) from None
    differing = [name for name in ChatSettings.model_fields if getattr(recorded, name) != getattr(target.chat, name)]
    if differing:
        name = differing[0]
        raise ConfigError(
            f"the generations were made with target.chat.{name} = {getattr(recorded, name)!r}, but this recipe "
            f"says target.chat.{name} = {getattr(target.chat, name)!r}",
            fix="use the recipe the generations were made with, or generate again with this one",
            path=str(Path(generations_dir) / "manifest.json"),
        )
    return recorded
