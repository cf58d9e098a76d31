from pydantic import Field

from eagle3_core.base import StageConfig


class LengthsConfig(StageConfig):
    """The lengths stage: token counts of sequences/, short ones rejected."""

    min_tokens: int = Field(1, ge=1, description="Sequences shorter than this are rejected (reason `short`).")
    label: str = Field("all", description="A name written beside the counts.")
