"""The whole DAG as one Prefect flow whose single parameter is the pipeline config.

generate -> reconstruct -> vocab -> extract -> train -> evaluate, each stage its own flow run
(a subflow), each skipping itself when its manifest says it is complete for the same inputs and
config. Because the parameter is ``PipelineConfig``, the Prefect UI renders it as a form and
validates it exactly as ``eagle3 pipeline --config`` does.

Guarantees:
- With ``config.toy`` set, the toy target is built (or loaded from its cache) and becomes
  ``target.path``; prompts left unset become the toy's own train / held-out prompts, and
  ``{toy}`` in a prompts input stands for the toy's directory. With ``config.serve`` set, vLLM is started for the target only while the
  generate stage runs (its URL fills ``generate.base_urls``) and is stopped after it, error or
  not; when generate has nothing left to do, vLLM is not started at all.
- A failed stage fails this flow run with the stage's own exception and message.
- Every run, failed or not, leaves a keyed markdown artifact, ``pipeline-summary``, with each
  stage's outcome and the headline figures.

Manual run from Python::

    from eagle3_core.config import PipelineConfig
    from flows.pipeline import pipeline
    pipeline(PipelineConfig.from_yaml("configs/toy.yaml"))
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from prefect import flow, get_run_logger, task

from eagle3_core.config import PipelineConfig
from flows.pipeline_stages import Outcome, generate_is_done, run_stage
from flows.run_summary import summary_markdown


@flow(name="pipeline", log_prints=True)
def pipeline(config: PipelineConfig) -> dict[str, dict]:
    """Run every selected stage of the DAG into ``config.out``."""
    outcomes: dict[str, Outcome] = {}
    config.require_prompts()
    try:
        config = with_target(config, outcomes)
        with served_for_generation(config, outcomes) as served:
            run_stage("generate", served, outcomes)
        run_stage("reconstruct", config, outcomes)
        run_stage("vocab", config, outcomes)
        run_stage("extract", config, outcomes)
        run_stage("train", config, outcomes)
        run_stage("evaluate", config, outcomes)
    finally:  # a failed run gets its summary too; the stage's own exception still fails the run
        publish_summary(config, outcomes)
    return {name: vars(outcome) for name, outcome in outcomes.items()}


@task(name="toy-target")
def build_toy(config: PipelineConfig) -> str:
    """Build the toy target or load it from its cache (keyed by the hash of its recipe)."""
    from eagle3_core.toy.build import build_toy_target
    from tasks.common import PrefectReporter

    return str(build_toy_target(config.toy, reporter=PrefectReporter("toy")))


def with_target(config: PipelineConfig, outcomes: dict[str, Outcome]) -> PipelineConfig:
    """The config with ``target.path`` filled in by the toy builder when ``toy`` is set."""
    if config.toy is None:
        return config
    from eagle3_core.toy.build import is_built, toy_target_dir

    started, cached = time.time(), is_built(toy_target_dir(config.toy))
    path = build_toy(config)
    outcomes["toy"] = Outcome("toy", "reused" if cached else "ran", path, time.time() - started, started)
    return with_toy_paths(config, path)


TOY_DIR = "{toy}"  # in a prompts `input`, stands for the built toy target's directory


def with_toy_paths(config: PipelineConfig, path: str) -> PipelineConfig:
    """target.path = the toy target; prompts left unset = the toy's own train / held-out prompts,
    and ``{toy}`` in a prompts input = the toy's directory (its path holds the recipe hash)."""
    from eagle3_core.generate.config import PromptSource
    from eagle3_core.toy.build import HELDOUT_PROMPTS, TRAIN_PROMPTS

    def prompts(given: PromptSource | None, default: str) -> PromptSource:
        given = given or PromptSource(input=f"{TOY_DIR}/{default}")
        return given.model_copy(update={"input": given.input.replace(TOY_DIR, path)})

    return config.model_copy(update={
        "target": config.target.model_copy(update={"path": path}),
        "generate": config.generate.model_copy(update={"prompts": prompts(config.generate.prompts, TRAIN_PROMPTS)}),
        "evaluate": config.evaluate.model_copy(update={"prompts": prompts(config.evaluate.prompts, HELDOUT_PROMPTS)})})


@contextlib.contextmanager
def served_for_generation(config: PipelineConfig, outcomes: dict[str, Outcome]) -> Iterator[PipelineConfig]:
    """Yield the config with vLLM serving the target for generate, and stop vLLM afterwards."""
    if config.serve is None or "generate" not in config.stages or generate_is_done(config):
        yield config
        return
    from eagle3_core.serve.vllm_server import VLLMServer

    logger, started = get_run_logger(), time.time()
    logger.info("starting vLLM for %s (about 30 s on CPU)", config.target.path)
    with VLLMServer(config.target.require_path(), config.serve,
                    reasoning_parser=config.target.reasoning_parser) as server:
        outcomes["serve"] = Outcome("serve", "ran", server.base_url, time.time() - started, started)
        logger.info("vLLM serves %s at %s (pid %s)", server.model, server.base_url, server.pid)
        generate = config.generate.model_copy(update={"base_urls": [server.base_url]})
        yield config.model_copy(update={"generate": generate})
    logger.info("vLLM stopped")


def publish_summary(config: PipelineConfig, outcomes: dict[str, Outcome]) -> None:
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(summary_markdown(config, outcomes), key="pipeline-summary",
                             description=f"eagle3 pipeline into {config.out}")
