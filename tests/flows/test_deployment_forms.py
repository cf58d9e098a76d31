"""Every deployment runs from its Prefect UI form: with nothing edited, and with any one field
edited to another valid value (the parameters the form sends, validated as the flow run does).
The same forms go to a real `prefect server`, and each runs to completion unedited, in
tests/integration/test_deployments.py."""

from pathlib import Path

import pytest

from tests.flows.forms import filled_form, single_edits

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def deployments(tmp_path_factory):
    from deployments.serve import build_deployments

    return {d.name: d for d in build_deployments(ROOT / "configs" / "toy.yaml", str(tmp_path_factory.mktemp("out")))}


def form_of(deployment) -> tuple[dict, dict]:
    schema = deployment._parameter_openapi_schema.model_dump()
    return schema, filled_form(schema, deployment.parameters)


def validate_as_the_run_does(deployment, form: dict) -> None:
    """Each parameter through its declared model (the pipeline validates its own parameter so)."""
    import typing

    hints = typing.get_type_hints(flow_of(deployment).fn)
    for name, value in form.items():
        if hasattr(hints[name], "model_validate"):
            hints[name].model_validate(value)


def flow_of(deployment):
    from prefect.flows import load_flow_from_entrypoint

    return load_flow_from_entrypoint(str(ROOT / deployment.entrypoint))


@pytest.mark.parametrize("name", ["eagle3-pipeline", "eagle3-generate", "eagle3-nightly"])
def test_the_form_submitted_with_nothing_edited_is_accepted(deployments, name):
    schema, form = form_of(deployments[name])

    flow_of(deployments[name]).validate_parameters(form)


def _generate_fields(schema: dict) -> set[str]:
    return set(schema.get("definitions", {}).get("GenerateConfig", {}).get("properties", {}))


@pytest.mark.parametrize("name", ["eagle3-pipeline", "eagle3-generate", "eagle3-nightly"])
def test_a_form_shows_only_what_the_run_uses_and_says_what_each_parameter_is(deployments, name):
    """Generate's copies of the target's settings (chat, the tool-rows rule) showed values the run
    ignores ("Set it in target.chat, not here", both toggles on where target.chat's were off), and the
    generate form's out_dir, target and progress_bar had no description: progress_bar, a terminal
    setting, is no parameter at all now."""
    schema, _ = form_of(deployments[name])
    assert _generate_fields(schema) and not _generate_fields(schema) & {"chat", "refuse_tool_rows", "model_fingerprint"}
    if name != "eagle3-generate":  # train's recipe hash is the pipeline's to fill in: the form pre-filled it
        tracking = schema["definitions"]["TrackingConfig"]["properties"]
        assert "project" in tracking and "recipe_hash" not in tracking
        assert "recipe_hash" not in str(deployments[name].parameters)
    assert "progress_bar" not in schema["properties"]
    undescribed = [p for p, v in schema["properties"].items() if not v.get("description")]
    assert undescribed == [], f"{name}: parameters without a description: {undescribed}"


@pytest.mark.parametrize("name", ["eagle3-pipeline", "eagle3-generate", "eagle3-nightly"])
def test_the_form_with_any_one_field_edited_is_accepted_or_refused_in_one_line_naming_it(deployments, name):
    """Another valid value of one field runs; where it conflicts with another field (a copy of
    target.chat, a variant a loader cannot read) the refusal is one line naming the field edited."""
    from pydantic import ValidationError

    from eagle3_core.config import format_validation_error

    schema, form = form_of(deployments[name])
    wrong, accepted, copies, tried = [], 0, 0, 0
    for field, edited in single_edits(schema, form):
        tried += 1
        try:
            validate_as_the_run_does(deployments[name], edited)
            accepted += 1
        except ValidationError as exc:
            message = format_validation_error(exc)
            group = field.split(".", 1)[1].removeprefix("recipe.").rsplit(".", 1)[0]  # config.x.y.z -> x.y
            if "\n" in message or group not in message:
                wrong.append(f"{field}: {message}")
            # generate.chat is target.chat's copy: each other value of its fields (reasoning_effort's seven
            # among them) is refused, as it must be
            copies += ".generate.chat." in field and "differs from target.chat" in message
    assert tried >= 20 and accepted + copies >= tried - 3 and wrong == []


def test_a_copy_set_to_another_value_than_its_source_is_one_line_naming_both_fields(deployments):
    from pydantic import ValidationError

    from eagle3_core.config import PipelineConfig, format_validation_error

    _, form = form_of(deployments["eagle3-pipeline"])  # an API caller's parameters: the form has no such field
    form["config"]["generate"]["chat"] = {"skip_special_tokens": False, "spaces_between_special_tokens": True}

    with pytest.raises(ValidationError) as error:
        PipelineConfig.model_validate(form["config"])

    message = format_validation_error(error.value)
    assert "\n" not in message
    assert message.startswith("invalid config: generate.chat {") and "differs from target.chat {" in message


def test_a_nightly_form_that_breaks_a_rule_fails_in_the_configs_one_line_naming_the_fields(deployments):
    """The nightly validates its own parameter, as the pipeline does: Prefect's refusal came as
    "Validation of flow parameters failed with error: ..." around pydantic's own text."""
    from eagle3_core.errors import ConfigError
    from flows.nightly import validated

    _, form = form_of(deployments["eagle3-nightly"])
    form["config"]["recipe"]["target"].update(history_reasoning="drop", history_supervised=True)

    with pytest.raises(ConfigError) as refused:
        validated(form["config"])

    (line,) = [line for line in refused.value.message.splitlines() if "history_supervised" in line]
    assert line.startswith("invalid config: recipe.target: target.history_supervised") and "history_reasoning" in line
