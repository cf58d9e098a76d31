"""The pipeline config: one typed tree, the parameter of the Prefect pipeline flow.

Each stage's config lives beside its code and composes here: ``PipelineConfig`` holds the run's
shared settings (``PipelineSettings``: where it goes, which stages, the target, the toy, vLLM) and
one section per declared stage (``eagle3_core.stages.STAGES``), named after it and typed as its
stage's ``cfg``, in DAG order; a new stage's section appears with its declaration. Recipes under
``configs/`` are YAML files of this model; the CLI and the Prefect UI validate through it the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, create_model, model_validator

from eagle3_core.base import StrictModel
from eagle3_core.errors import ConfigError
from eagle3_core.recipe_file import format_validation_error, read_yaml
from eagle3_core.run.layout import RunLayout
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages import STAGE_NAMES, STAGES
from eagle3_core.target.config import TargetConfig
from eagle3_core.toy.config import ToyTargetConfig


def _declared(names: list[str]) -> list[str]:
    """Only declared stages."""
    unknown = [n for n in names if n not in STAGE_NAMES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}: the stages are {list(STAGE_NAMES)}")
    return names


StageNames = Annotated[list[str], AfterValidator(_declared)]


class PipelineSettings(StrictModel):
    """What a run shares between its stages; ``PipelineConfig`` adds a section per stage, each a ``StageConfig``
    that takes what it needs of these settings through its own hooks: nothing below names a stage."""

    out: str = Field("runs/default", description="Run directory; each stage writes its own folder under it.")
    stages: StageNames = Field(
        default_factory=lambda: list(STAGE_NAMES),
        description="Stages to run, in DAG order.",
        json_schema_extra=lambda schema: schema["items"].update(enum=list(STAGE_NAMES)),  # the UI form's choices
    )
    target: TargetConfig = Field(default_factory=TargetConfig, description="The target model.")
    toy: ToyTargetConfig | None = Field(
        None, description="Build (or load cached) the toy target and use it as target.path."
    )
    serve: ServeConfig | None = Field(
        None,
        description="Start vLLM locally for the target: for generate when `generate.base_urls` is empty (the endpoints a recipe names are asked, not replaced), and for evaluation; None = generate asks `generate.base_urls`, evaluate starts vLLM with the defaults.",
    )

    def require_runnable(self, recipe: str | None = None) -> None:
        """Refuse, before anything starts, a run whose selected stages cannot run with these settings: each
        stage's own refusal (``StageConfig.refusal_in_run``: generate without prompts), then the target model
        missing for the stages that need it (the toy fills it first; ``StageConfig.needs_target``):
        reconstruct had failed hours in, after generate, asking for a flag the pipeline does not have."""
        for name in self.stages:
            refusal = getattr(self, name).refusal_in_run(self)
            if refusal is not None:
                raise ConfigError(refusal[0], path=recipe, fix=refusal[1])
        needs = [name for name in self.stages if getattr(self, name).needs_target(self)]
        if needs and not self.target.path and self.toy is None:
            raise ConfigError(
                f"target.path is not set, and the selected stages {', '.join(needs)} need the target model",
                path=recipe,
                fix="set target.path in the recipe to the local model directory (its tokenizer, config and weights), "
                "or leave those stages out of `stages`",
            )

    @model_validator(mode="after")
    def _each_stage_takes_what_it_needs_of_the_run(self) -> "PipelineConfig":
        """Each section settled by its stage's ``in_run`` (generate: the target's chat settings and row rules, a
        ``generate.chat`` equal to its default counting as unset, since a Prefect form fills every field from its
        default; train: the recipe's hash), in DAG order, so a section sees those before it settled."""
        for name in STAGE_NAMES:
            section = getattr(self, name)
            settled = section.in_run(self)
            if settled is not section:  # assigning validates again (validate_assignment): only a change
                setattr(self, name, settled)
        return self

    def recipe_hash(self) -> str:
        """What the recipe asks for, as a 16-hex digest: every section but where the run goes (``out``), which
        stages run now, and what the run fills in (``StageConfig.run_filled``: the hash itself)."""
        from eagle3_core.base import stable_hash

        recipe = self.model_dump(mode="json", exclude={"out", "stages"})
        for name in STAGE_NAMES:
            for dotted in getattr(self, name).run_filled:
                *path, last = dotted.split(".")
                section = recipe[name]
                for part in path:
                    section = section[part]
                section.pop(last)
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


def stage_sections() -> dict[str, Any]:
    """One field per declared stage, in DAG order: its name, its stage's config model, and the
    model's first docstring line as the field's description (the UI form's section title)."""
    from eagle3_core.base import StageConfig

    sections = {}
    for spec in STAGES:
        model = spec.config_model
        if not issubclass(model, StageConfig):  # its hooks are how the pipeline config reaches it
            raise TypeError(f"the {spec.name} stage's config {model.__name__} must derive from base.StageConfig")
        about = (model.__doc__ or "").strip().splitlines()
        sections[spec.name] = (model, Field(default_factory=model, description=about[0] if about else spec.name))
    return sections


class PipelineConfig(
    create_model("PipelineSections", __base__=PipelineSettings, __module__=__name__, **stage_sections())
):
    """Everything one run needs, from prompts to an evaluated drafter."""

    # the shared settings (PipelineSettings), then a section per declared stage (stage_sections)
