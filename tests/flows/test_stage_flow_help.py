"""Every stage flow's parameter has a description for its deployment form, a new name included: the
shared words (``PARAMETER_HELP``), else the declaration's for an input folder, else the field's own
description, else its model's docstring; a parameter with none of them is refused, naming the fix."""

from __future__ import annotations

import inspect

import pytest

from eagle3_core.stages import BY_NAME
from eagle3_core.target.config import TargetConfig
from flows import stages
from flows.stages import parameter_help

VOCAB = BY_NAME["vocab"]


def parameter(name: str, annotation=str) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)


def test_an_input_folder_without_shared_words_is_described_by_the_declaration(monkeypatch):
    monkeypatch.delitem(stages.PARAMETER_HELP, "sequences_dir")

    assert parameter_help(VOCAB, parameter("sequences_dir")) == (
        "The folder reconstruct wrote (sequences/), read by this stage."
    )
    assert parameter_help(BY_NAME["evaluate"], parameter("export_dir")).startswith("The trained drafter's")


def test_a_model_without_shared_words_is_described_by_its_docstring(monkeypatch):
    monkeypatch.delitem(stages.PARAMETER_HELP, "target")

    described = parameter_help(VOCAB, parameter("target", TargetConfig | None))

    assert described == TargetConfig.__doc__.strip().splitlines()[0]


def test_a_parameter_with_no_description_anywhere_is_refused_naming_the_fix():
    with pytest.raises(TypeError, match=r"parameter 'window' has no description .* metadata=\{\"description\""):
        parameter_help(VOCAB, parameter("window", int))


def test_every_built_in_stage_flow_describes_every_parameter():
    for name in BY_NAME:
        doc = stages.stage_flow(name).__doc__
        listed = doc.split("Args:\n")[1].splitlines()
        assert all(": " in line and line.split(": ", 1)[1].strip() for line in listed), (name, listed)
