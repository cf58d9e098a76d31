"""The pipeline config: one typed tree, the parameter of the Prefect pipeline flow.

Each stage's config lives beside its code and composes here. Recipes under ``configs/``
are YAML files of this model; the CLI and the Prefect UI validate through it the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationError, model_validator

from eagle3_core.base import StrictModel
from eagle3_core.errors import ConfigError
from eagle3_core.recipe_file import format_validation_error, read_yaml
from eagle3_core.run.layout import RunLayout
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages import stage_names
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.vocab.config import VocabConfig
from eagle3_core.target.config import TargetConfig
from eagle3_core.toy.config import ToyTargetConfig


def _declared(names: list[str]) -> list[str]:
    """Only declared stages (as declared when the config is read: a test may declare one more)."""
    unknown = [n for n in names if n not in stage_names()]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}: the stages are {list(stage_names())}")
    return names


def _stage_enum(schema: dict) -> None:
    schema["items"]["enum"] = list(stage_names())  # the UI form's choices


StageNames = Annotated[list[str], AfterValidator(_declared)]


class PipelineConfig(StrictModel):
    """Everything one run needs, from prompts to an evaluated drafter."""

    out: str = Field("runs/default", description="Run directory; each stage writes its own folder under it.")
    stages: StageNames = Field(
        default_factory=lambda: list(stage_names()),
        description="Stages to run, in DAG order.",
        json_schema_extra=_stage_enum,
    )
    target: TargetConfig = Field(default_factory=TargetConfig, description="The target model.")
    toy: ToyTargetConfig | None = Field(
        None, description="Build (or load cached) the toy target and use it as target.path."
    )
    serve: ServeConfig | None = Field(
        None,
        description="Start vLLM locally for the target (generation) and for evaluation; None = use generate.base_urls.",
    )
    generate: GenerateConfig = Field(default_factory=GenerateConfig)
    reconstruct: ReconstructConfig = Field(default_factory=ReconstructConfig)
    vocab: VocabConfig = Field(default_factory=VocabConfig)
    extract: ExtractConfig = Field(default_factory=ExtractConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)

    def require_prompts(self, recipe: str | None = None) -> None:
        """Refuse, before anything starts, a run whose selected generate stage has no prompts
        (the toy fills them itself); the fix names the recipe field, not a CLI flag."""
        if "generate" in self.stages and self.generate.prompts is None and self.toy is None:
            raise ConfigError(
                "generate.prompts is not set, and the generate stage needs prompts",
                path=recipe,
                fix="set generate.prompts.input in the recipe (a .jsonl/.parquet file, a folder "
                "or a dataset name), or leave generate out of `stages`",
            )

    def require_target(self, recipe: str | None = None) -> None:
        """Refuse, before the first stage, a run whose selected stages need the target model when
        ``target.path`` is unset (the toy fills it first): reconstruct failed hours in, after
        generate, asking for a flag the pipeline does not have."""
        needs = [s for s in self.stages if s != "generate" or self.serve is not None]
        if needs and not self.target.path:
            raise ConfigError(
                f"target.path is not set, and the selected stages {', '.join(needs)} need the target model",
                path=recipe,
                fix="set target.path in the recipe to the local model directory (its tokenizer, config and weights), "
                "or leave those stages out of `stages`",
            )

    @model_validator(mode="after")
    def _generate_sends_the_targets_chat_settings(self) -> "PipelineConfig":
        """``target.chat`` is the one source: generate gets a copy, never its own values. A
        ``generate.chat`` equal to its default counts as unset: the Prefect form fills every field
        from its default, and a run submitted with nothing edited was refused over that."""
        copied = self.generate.with_target(self.target)  # its chat settings and tool-rows rule
        if copied is not self.generate:  # assigning validates again (validate_assignment): only a change
            self.generate = copied
        return self

    @model_validator(mode="after")
    def _train_knows_its_recipe(self) -> "PipelineConfig":
        """The train stage reports the recipe's hash to its tracking run and model card."""
        found = self.recipe_hash()
        if self.train.tracking.recipe_hash != found:
            self.train = self.train.model_copy(
                update={"tracking": self.train.tracking.model_copy(update={"recipe_hash": found})}
            )
        return self

    def recipe_hash(self) -> str:
        """What the recipe asks for, as a 16-hex digest: every section but where the run goes
        (``out``), which stages run now, and the hash itself."""
        from eagle3_core.base import stable_hash

        recipe = self.model_dump(mode="json", exclude={"out", "stages"})
        recipe["train"]["tracking"].pop("recipe_hash")
        return stable_hash(recipe)

    @property
    def layout(self) -> RunLayout:
        return RunLayout(root=Path(self.out))

    @classmethod
    def from_yaml(cls, path: str | Path) -> "PipelineConfig":
        """Load a recipe; errors name the dotted field and the file."""
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"config file not found: {path}", fix="pass a recipe such as configs/toy.yaml")
        data = read_yaml(path)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc), path=str(path)) from None
