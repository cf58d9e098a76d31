"""Each CLI option that sets a config field defaults to that field's default: the config is the
one place a default is defined, and the command line may not quietly disagree with a recipe."""

import importlib

import click
import pytest

from eagle3_core.prompts.source import PromptSource
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.train.config import OnlineVllmConfig, TrainConfig
from eagle3_core.stages.vocab.config import VocabConfig
from eagle3_core.target.config import TargetConfig

# The configs each command builds; an option is checked against the field of the same name.
COMMAND_CONFIGS = {
    "generate": [GenerateConfig, PromptSource],
    "reconstruct": [ReconstructConfig, TargetConfig],
    "vocab": [VocabConfig, TargetConfig],
    "extract": [ExtractConfig, TargetConfig],
    "train": [TrainConfig, OnlineVllmConfig, TargetConfig],
    "evaluate": [EvaluateConfig, PromptSource, TargetConfig],
    "serve": [ServeConfig],
}
# Options named otherwise than their field: (command, option) -> (config, field, option value -> field value).
RENAMED = {
    ("train", "layers"): (TargetConfig, "aux_layer_ids", lambda v: v),
    ("train", "report_to"): (TrainConfig, "report_to", lambda v: list(v)),
    ("evaluate", "k"): (EvaluateConfig, "num_speculative_tokens", lambda v: v),
    ("evaluate", "vllm_python"): (ServeConfig, "python", lambda v: v),
    ("evaluate", "offline_only"): (EvaluateConfig, "online", lambda v: not v),
    ("evaluate", "online_only"): (EvaluateConfig, "offline", lambda v: not v),
    ("evaluate", "no_baseline"): (EvaluateConfig, "baseline", lambda v: not v),
}
# Deliberate differences, each with its reason.
DIFFERENT_ON_PURPOSE = {
    (
        "serve",
        "port",
    ): "None = the recipe's serve.port, else 8000: a port a person can type (a config's None = a free one)",
    ("serve", "host"): "None = the recipe's serve.host, else the config default",
    ("serve", "max_model_len"): "None = the recipe's serve.max_model_len, else the config default",
}


def option_defaults(command_name: str):
    command = importlib.import_module(f"flows.cli.{command_name}").command
    ctx = click.Context(command)
    for param in command.params:
        if isinstance(param, click.Option) and not param.required:
            raw = param.get_default(ctx)
            value = None if raw is None else param.type_cast_value(ctx, raw)
            yield param.name, list(value) if param.multiple else value  # a repeatable option is a list field


def checked_options():
    for command_name, configs in COMMAND_CONFIGS.items():
        for option, default in option_defaults(command_name):
            if (command_name, option) in DIFFERENT_ON_PURPOSE:
                continue
            if (command_name, option) in RENAMED:
                config, field, to_field = RENAMED[command_name, option]
                yield command_name, option, to_field(default), config, field
                continue
            for config in configs:
                if option in config.model_fields:
                    yield command_name, option, default, config, option


CHECKED = list(checked_options())


@pytest.mark.parametrize("command_name,option,value,config,field", CHECKED, ids=[f"{c}--{o}" for c, o, *_ in CHECKED])
def test_an_option_defaults_to_its_config_fields_default(command_name, option, value, config, field):
    expected = config.model_fields[field].get_default(call_default_factory=True)
    assert value == expected, (
        f"`eagle3 {command_name} --{option.replace('_', '-')}` defaults to {value!r}, "
        f"{config.__name__}.{field} to {expected!r}: change one, or list it in DIFFERENT_ON_PURPOSE"
    )


def test_most_options_are_checked():
    """Guards the check itself: a rename in the configs must not silently empty it."""
    assert len(CHECKED) >= 40
