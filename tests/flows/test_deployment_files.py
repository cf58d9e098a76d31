"""deployments/prefect.yaml (the one definition of the deployments), deployments/serve.py (derived
from it) and docker/: what they register, with which parameters, and that they install what the
README's set-up installs. (Docker itself cannot run here; the served deployments run for real in
tests/integration/test_deployments.py.)"""

import importlib
import re
from pathlib import Path

import pytest
import yaml

from eagle3_core.config import PipelineConfig

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "configs" / "toy.yaml"


@pytest.fixture(scope="module")
def deployments():
    data = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    return {d["name"]: d for d in data["deployments"]}


def load_entrypoint(entrypoint):
    path, name = entrypoint.split(":")
    return getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)


def test_prefect_yaml_has_the_three_deployments_on_a_process_pool_and_docker_variants(deployments):
    assert {"eagle3-pipeline", "eagle3-generate", "eagle3-nightly"} <= set(deployments)
    for name in ("eagle3-pipeline", "eagle3-generate", "eagle3-nightly"):
        assert deployments[name]["work_pool"]["name"] == "eagle3-process"
        docker = deployments[f"{name}-docker"]
        assert docker["work_pool"]["name"] == "eagle3-docker"
        assert docker["entrypoint"] == deployments[name]["entrypoint"]
        assert docker["parameters"] == deployments[name]["parameters"]


def test_only_the_nightly_is_scheduled_at_two_in_utc_with_one_run_at_a_time(deployments):
    nightly = deployments["eagle3-nightly"]
    assert nightly["schedules"] == [{"cron": "0 2 * * *", "timezone": "UTC", "active": True}]
    assert nightly["concurrency_limit"]["limit"] == 1
    assert not deployments["eagle3-pipeline"].get("schedules")
    assert not deployments["eagle3-generate"].get("schedules")


def test_every_entrypoint_is_a_flow_that_accepts_its_parameters(deployments):
    from prefect import Flow

    for deployment in deployments.values():
        flow = load_entrypoint(deployment["entrypoint"])
        assert isinstance(flow, Flow)
        flow.validate_parameters(deployment["parameters"])


def test_the_parameters_are_the_toy_recipe(deployments):
    recipe = PipelineConfig.from_yaml(TOY)
    pipeline = PipelineConfig.model_validate(deployments["eagle3-pipeline"]["parameters"]["config"])
    nightly = PipelineConfig.model_validate(deployments["eagle3-nightly"]["parameters"]["config"]["recipe"])
    expected = recipe.model_copy(update={"out": pipeline.out})
    message = "deployments/prefect.yaml's recipes.toy_recipe differs from configs/toy.yaml: copy the recipe there"
    assert pipeline == expected, message
    assert nightly == expected, message
    toy = yaml.safe_load(TOY.read_text())
    # the generate flow takes the target too: its chat settings are what every request sends
    assert deployments["eagle3-generate"]["parameters"]["target"] == toy["target"]


def test_the_generate_deployment_answers_the_toys_prompts_from_its_own_rows_with_no_server(deployments):
    """A stage flow starts no vLLM and a form cannot know an endpoint, so the served toy failed in 1 s;
    the rows' own answers need no server and write the same folder (it runs to completion, unedited,
    in tests/integration/test_deployments.py)."""
    from eagle3_core.toy.dataset_answers import REASONED

    cfg = deployments["eagle3-generate"]["parameters"]["cfg"]
    toy = yaml.safe_load(TOY.read_text())["generate"]

    assert cfg["source"] == "dataset" and cfg["prompts"] == {**toy["prompts"], "input": f"{{toy}}/{REASONED}"}
    assert {k: v for k, v in cfg.items() if k not in ("source", "prompts")} == {
        k: v for k, v in toy.items() if k != "prompts"
    }


def test_toy_in_any_string_of_a_flows_parameters_is_the_toy_directory():
    from eagle3_core.stages.generate.config import GenerateConfig
    from eagle3_core.target.config import TargetConfig
    from tasks.toy import holds, replaced

    recipe = PipelineConfig.from_yaml(TOY)
    arguments = {
        "cfg": GenerateConfig.model_validate({"prompts": {"input": "{toy}/dataset_answers.jsonl"}}),
        "target": TargetConfig(path="{toy}"),
        "out_dir": "runs/generate",
    }

    expanded, config = replaced(arguments, "{toy}", "/cache/toy/abc"), replaced(recipe, "{toy}", "/cache/toy/abc")

    assert expanded["cfg"].prompts.input == "/cache/toy/abc/dataset_answers.jsonl"
    assert expanded["target"].path == "/cache/toy/abc" and expanded["out_dir"] == "runs/generate"
    assert config.generate.prompts.input == "/cache/toy/abc/prompts_train.jsonl"
    assert config.evaluate.prompts.input == "/cache/toy/abc/prompts_heldout.jsonl"
    assert holds(recipe, "{toy}") and not holds(config, "{toy}") and replaced(config, "{toy}", "x") is config


def load(entrypoint: str):
    """``flows/pipeline.py:pipeline`` -> the flow object."""
    from eagle3_core.stages import load as load_reference

    path, name = entrypoint.split(":")
    return load_reference(f"{path.removesuffix('.py').replace('/', '.')}:{name}")


def test_serve_py_registers_exactly_what_prefect_yaml_defines(deployments, tmp_path):
    from deployments.serve import build_deployments

    built = {d.name: d for d in build_deployments(TOY, str(tmp_path / "served"))}

    assert set(built) == {"eagle3-pipeline", "eagle3-generate", "eagle3-nightly"}
    for name, deployment in built.items():
        defined = deployments[name]
        assert deployment.entrypoint == defined["entrypoint"]
        assert deployment.tags == defined["tags"]
        assert deployment.description == defined.get("description", load(defined["entrypoint"]).description)
        assert [(s.schedule.cron, s.schedule.timezone) for s in deployment.schedules] == [
            (s["cron"], s["timezone"]) for s in defined.get("schedules", [])
        ]
        assert deployment.concurrency_limit == (defined.get("concurrency_limit") or {}).get("limit")
    assert built["eagle3-pipeline"].parameters["config"]["out"] == str(tmp_path / "served")
    assert built["eagle3-nightly"].parameters["config"]["root"] == str(tmp_path / "served" / "nightly")
    assert built["eagle3-nightly"].parameters["config"]["recipe"] == built["eagle3-pipeline"].parameters["config"]


def test_a_served_run_that_edits_target_chat_in_its_form_is_accepted_and_generate_sends_the_edit(tmp_path):
    """target.chat is the one place chat settings are set: a user who changes it in a served
    deployment's run form must not be refused over a copy in generate.chat they never set."""
    import copy

    from deployments.serve import build_deployments
    from flows.nightly import nightly
    from flows.pipeline import pipeline

    built = {d.name: d for d in build_deployments(ROOT / "configs" / "qwen3.yaml", str(tmp_path / "served"))}
    config = copy.deepcopy(built["eagle3-pipeline"].parameters["config"])
    config["target"]["chat"]["chat_template_kwargs"] = {"enable_thinking": False}  # the edit in the form
    nightly_config = copy.deepcopy(built["eagle3-nightly"].parameters["config"])
    nightly_config["recipe"]["target"]["chat"] = config["target"]["chat"]

    ran = pipeline.validate_parameters({"config": config})["config"]
    ran_nightly = nightly.validate_parameters({"config": nightly_config})["config"].recipe

    assert ran.generate.chat.chat_template_kwargs == {"enable_thinking": False}
    assert ran_nightly.generate.chat.chat_template_kwargs == {"enable_thinking": False}
    # qwen3.yaml names no endpoint for generate (its `serve:` serves the pipeline), so the generate
    # flow, which starts no vLLM, keeps prefect.yaml's parameters: the toy's own answers, which run
    assert built["eagle3-generate"].parameters["cfg"]["source"] == "dataset"


def test_serve_py_gives_the_generate_deployment_a_recipes_generate_and_target_where_it_runs_alone(tmp_path):
    from deployments.serve import build_deployments

    recipe = yaml.safe_load((ROOT / "configs" / "qwen3.yaml").read_text())
    recipe["generate"] = {"prompts": {"input": "mlabonne/open-perfectblend"}, "base_urls": ["http://gpu:8000/v1"]}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(recipe))

    generate = {d.name: d for d in build_deployments(tmp_path / "mine.yaml", str(tmp_path))}["eagle3-generate"]

    assert generate.parameters["cfg"]["base_urls"] == ["http://gpu:8000/v1"]
    # the target's chat settings are what every request sends; generate's copy of them is no parameter
    assert generate.parameters["target"]["chat"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert "chat" not in generate.parameters["cfg"] and "model_fingerprint" not in generate.parameters["cfg"]


def test_serve_py_reads_a_relative_recipe_from_where_it_was_typed(tmp_path):
    import subprocess
    import sys

    (tmp_path / "mine.yaml").write_text("train:\n  ttt_stepz: 3\n")  # found, then refused for its own field

    result = subprocess.run(
        [sys.executable, str(ROOT / "deployments" / "serve.py"), "--recipe", "mine.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert "train.ttt_stepz" in result.stderr and "config file not found" not in result.stderr


def test_a_stage_deployment_runs_the_flow_its_stage_declares_and_the_pipeline_names_the_declared_order(deployments):
    from eagle3_core.stages import STAGE_NAMES
    from flows.stages import stage_flow

    # generate's flow is built from its declaration, named as Prefect records a served flow's entrypoint
    assert deployments["eagle3-generate"]["entrypoint"] == "flows/stages.py:generate_flow"
    assert load(deployments["eagle3-generate"]["entrypoint"]) is stage_flow("generate")
    # the stage list is stated by the declaration alone: the pipeline deployment takes the flow's description
    assert "description" not in deployments["eagle3-pipeline"]
    assert " -> ".join(STAGE_NAMES) in load(deployments["eagle3-pipeline"]["entrypoint"]).description


def test_the_worker_image_installs_the_project_the_way_the_readme_does():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "RUN make setup" in dockerfile
    assert re.search(r"^ARG BASE_IMAGE=", dockerfile, re.M)
    vllm_default = re.search(r"^VLLM_PACKAGE \?= (\S+)", makefile, re.M).group(1)
    assert f"ARG VLLM_PACKAGE={vllm_default}" in dockerfile


def test_compose_runs_a_server_on_postgres_a_worker_and_vllm():
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    assert {"postgres", "prefect-server", "worker", "vllm"} <= set(compose)
    assert compose["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].startswith(
        "postgresql+asyncpg://"
    )
    assert compose["worker"]["build"]["dockerfile"] == "docker/Dockerfile"
    assert "deployments/prefect.yaml" in compose["worker"]["command"]
