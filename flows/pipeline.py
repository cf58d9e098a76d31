"""The whole DAG as one Prefect flow whose single parameter is the pipeline config.

The stages declared in ``eagle3_core.stages``, in their order, each its own flow run (a subflow) that waits for the stages it reads
(``StageDone`` tokens, nothing else), so the run graph draws the DAG and only it; each skips itself when its
manifest says it is complete for the same inputs and config. Because the parameter is ``PipelineConfig``, the Prefect UI renders it as a form and
validates it exactly as ``eagle3 pipeline --config`` does.

Guarantees:
- With ``config.toy`` set, the toy target is built (or loaded from its cache) and becomes
  ``target.path``; prompts left unset become the toy's own train / held-out prompts, and
  ``{toy}`` in any string of the recipe stands for the toy's directory (without ``toy:``, the default
  toy's: ``tasks/toy.py``). With ``config.serve`` set, vLLM is started for the target only while a
  stage that asks a server runs (its stage's ``endpoint_field``: generate's ``base_urls``, with
  ``source: server``), its URL in that field of the stage's section, and is stopped after it, error
  or not; when that stage has nothing left to do, or the recipe fills that field itself (its endpoints
  are asked, never replaced), vLLM is not started for it at all. Without ``serve``,
  such a stage with no endpoint in that field fails in its subflow, with its own error naming it.
- A stage's input checks run in its own subflow, once (its keys; with ``serve``, a stage that asks a
  server is also asked whether it would skip before vLLM starts, a second time): an input error fails
  that subflow, so the run graph and the summary show the stage failed with its error.
- A stage runs only when every stage it reads has a ``complete`` manifest on disk (from this run
  or an earlier one); otherwise it is ``blocked``, never run on missing inputs. Whether a stage's
  work is reused is decided by the stage itself; the pipeline reports it (``reused`` when the
  manifest did not change).
- A failed stage fails this flow run with the stage's own exception and message; a user's mistake
  (an ``Eagle3Error``) with its one line as the run's state message and no traceback in its logs
  (``tasks.common.failing_in_one_line``). A selected stage
  that was blocked fails it too (``StagesBlocked``, raised once every other stage has run, with
  every stage's outcome), so a run that shows Completed in the UI ran all it was asked to.
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
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from pydantic import ValidationError

from eagle3_core.config import PipelineConfig, format_validation_error
from eagle3_core.errors import ConfigError, Eagle3Error, StagesBlocked
from eagle3_core.run.driver import StageRun
from eagle3_core.run.manifest import read_manifest
from eagle3_core.run.summary import Outcome, summary_markdown
from eagle3_core.stages import BY_NAME, STAGE_NAMES, STAGES, StageSpec
from flows.stages import stage_flow
from tasks.common import failing_in_one_line
from tasks.toy import TOY_DIR, replaced, with_toy_dir


# validated in the body, not by Prefect: a refused run then fails with the config's own one-line error
# and still leaves its summary (Prefect's refusal came before the body, with neither)
# the description names the declared stages: the deployments take it from here (deployments/prefect.yaml)
@flow(
    name="pipeline",
    log_prints=True,
    validate_parameters=False,
    description=f"The whole DAG on one recipe: {' -> '.join(STAGE_NAMES)}.",
)
def pipeline(config: PipelineConfig) -> dict[str, dict]:
    """Run every selected stage of the DAG into ``config.out``.

    Args:
        config: The pipeline recipe (configs/*.yaml as a form): the run folder, the stages to run, and each
            stage's section; target.chat is set once there (generate's copy follows it).
    """
    return failing_in_one_line(run_pipeline, config)  # a user's mistake: its one line on the run's page


def run_pipeline(config: PipelineConfig | dict) -> dict[str, dict]:
    """The pipeline's body: every selected stage in turn, then the run's summary, failed or not."""
    config = validated(config)
    outcomes: dict[str, Outcome] = {}
    results: dict[str, Any] = {}  # stage -> its StageDone token, passed on as the DAG's edges
    error: BaseException | None = None  # what stopped the run, for its summary
    try:
        config.require_runnable()  # the toy fills target.path in with_target
        config = with_target(config, outcomes)
        config = with_served_model(config)
        for spec in STAGES:
            config = settled(spec, config)
            run_stage(spec.name, config, outcomes, results)
        refuse_blocked(outcomes)
    except BaseException as exc:
        error = exc
        raise
    finally:  # a failed run gets its summary too, with the reason; the stage's own exception still fails the run
        publish_summary(config, outcomes, error)
    return {name: vars(outcome) for name, outcome in outcomes.items()}


def validated(config: PipelineConfig | dict) -> PipelineConfig:
    """The flow's parameter as a ``PipelineConfig``; a form's values that are not one fail the run
    with the config's error (one line per problem, each naming its fields), summary left first."""
    if isinstance(config, PipelineConfig):
        return config
    try:
        return PipelineConfig.model_validate(config)
    except ValidationError as exc:
        error = ConfigError(format_validation_error(exc))  # it names the fields and what to do: one line
    publish_markdown(f"# eagle3 pipeline: `{config.get('out')}`\n\nrefused: {error.message}", str(config.get("out")))
    raise error


def refuse_blocked(outcomes: dict[str, Outcome]) -> None:
    """A selected stage that could not run fails the flow run (in the UI too): Completed means all of
    it ran. The other stages still ran first, so one run reports every blocked stage at once."""
    blocked = {name: o.reason for name, o in outcomes.items() if o.status == "blocked"}
    if blocked:
        said = "; ".join(f"{name} {reason}" for name, reason in blocked.items())
        raise StagesBlocked(
            f"{len(blocked)} selected stage(s) did not run: {said}",
            outcomes={name: vars(outcome) for name, outcome in outcomes.items()},
            fix="add the stages they need to `stages:`, or point --out at a run that holds their output",
        )


def with_target(config: PipelineConfig, outcomes: dict[str, Outcome]) -> PipelineConfig:
    """The config with ``target.path`` filled in by the toy builder when ``toy`` is set, and ``{toy}``
    expanded wherever it is (without ``toy:``, to the default toy's directory: ``tasks.toy``)."""
    if config.toy is None:
        return with_toy_dir(config)
    from eagle3_core.toy.build import is_built, toy_target_dir
    from tasks.toy import build_toy

    started, cached = time.time(), is_built(toy_target_dir(config.toy))
    built = build_toy(config.toy)
    # Prefect links a parameter to a task by the id of the task's result. The stages get a copy: the
    # task's own string, found in every stage's parameters, drew an edge from the toy to each. Its
    # outcome keeps the task's own string for the run: freed, its id went to a later object (the served
    # target's fingerprint) and drew an edge from the toy to generate.
    path = str(Path(built))
    outcomes["toy"] = Outcome("toy", "reused" if cached else "ran", built, time.time() - started, started)
    return with_toy_paths(config, path)


def with_served_model(config: PipelineConfig) -> PipelineConfig:
    """With ``serve``, eagle3 starts the server, so the model that answers is ``target.path``'s bytes:
    they become generate's model in its keys (``generate.model_fingerprint``), known without starting
    vLLM (a rerun with nothing to do starts none). Another model at the same path or under the same
    served name is asked again; the same weights in a moved or re-spelt folder reuse their answers."""
    generate = config.generate
    if config.serve is None or "generate" not in config.stages or generate.source != "server" or generate.base_urls:
        return config  # base_urls: the recipe's own endpoints answer (``names_its_endpoints``), named as served
    path = Path(config.target.require_path())
    if not path.is_dir():
        raise ConfigError(
            f"target.path is not a model directory: {path}",
            fix="point target.path at the local model directory vLLM serves (its config, tokenizer and weights)",
        )
    from eagle3_core.target.fingerprint import model_fingerprint

    served = generate.model_copy(update={"model_fingerprint": model_fingerprint(path)})
    return config.model_copy(update={"generate": served})


def with_toy_paths(config: PipelineConfig, path: str) -> PipelineConfig:
    """target.path = the toy target; prompts left unset = the toy's own train / held-out prompts,
    and ``{toy}`` in any string of the recipe = the toy's directory (its path holds the recipe hash)."""
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.toy.build import HELDOUT_PROMPTS, TRAIN_PROMPTS

    def prompts(given: PromptSource | None, default: str) -> PromptSource:
        return given or PromptSource(input=f"{TOY_DIR}/{default}")

    config = config.model_copy(
        update={
            "target": config.target.model_copy(update={"path": path}),
            "generate": config.generate.model_copy(update={"prompts": prompts(config.generate.prompts, TRAIN_PROMPTS)}),
            "evaluate": config.evaluate.model_copy(
                update={"prompts": prompts(config.evaluate.prompts, HELDOUT_PROMPTS)}
            ),
        }
    )
    return replaced(config, TOY_DIR, path)


def settled(spec: StageSpec, config: PipelineConfig) -> PipelineConfig:
    """The config with the choices ``spec`` settles before it runs (train.mode auto, before extract)."""
    if spec.settle is None:
        return config
    config, why = spec.settle(config)
    if why:
        get_run_logger().info("%s", why)
    return config


def missing_inputs(spec: StageSpec, config: PipelineConfig) -> list[str]:
    """The stages this one reads whose folders hold no complete manifest."""
    missing = []
    for name in spec.reads(config):
        manifest = read_manifest(BY_NAME[name].out(config))
        if manifest is None or manifest.status != "complete":
            missing.append(name)
    return missing


def run_stage(
    name: str, config: PipelineConfig, outcomes: dict[str, Outcome], results: dict[str, Any] | None = None
) -> Outcome:
    """Run one stage's flow (a subflow of the caller, served by vLLM where it asks for it) unless it is
    unselected or blocked. Nothing of the stage is built here without ``serve``: its inputs are checked
    in its subflow, so an input error is that subflow's failure, in the run graph and the summary.

    The subflow waits for the results of the stages it reads that ran in this flow run
    (``results``), which makes those runs its parents in Prefect's run graph.
    """
    spec, results = BY_NAME[name], {} if results is None else results
    outcome = Outcome(stage=name, status="not selected", out_dir=str(spec.out(config)))
    outcomes[name] = outcome
    if name not in config.stages or not_to_run(spec, config, outcome, outcomes):
        return outcome
    before = read_manifest(spec.out(config))
    with failing(outcome), serving(spec, config, field_to_serve(spec, config), outcomes) as served:
        run_subflow(spec, served, outcome, results)
    after = read_manifest(spec.out(config))
    unchanged = before is not None and after is not None and before.updated_at == after.updated_at
    outcome.status = "reused" if unchanged and before.status == "complete" else "ran"
    outcome.counts = dict(after.counts) if after else {}
    get_run_logger().info("%s: %s in %.1f s", name, outcome.status, outcome.seconds)
    return outcome


def not_to_run(spec: StageSpec, config: PipelineConfig, outcome: Outcome, outcomes: dict[str, Outcome]) -> bool:
    """True, with the outcome set, for a stage that is blocked."""
    if missing := missing_inputs(spec, config):
        outcome.status = "blocked"
        outcome.reason = "needs " + ", ".join(
            f"{m} ({outcomes[m].status if m in outcomes else 'not run'})" for m in missing
        )
        get_run_logger().warning("%s: blocked, %s", spec.name, outcome.reason)
        return True
    return False


def endpoint_field(spec: StageSpec, config: PipelineConfig, stage: Any = None) -> str | None:
    """The field of ``spec``'s section listing the endpoints its stage asks for this config, None when
    it asks none or has nothing left to do: complete for these inputs and config, its subflow still
    runs and skips at once (the stage's own skip, before any endpoint is asked), so the run graph has
    it whatever was reused. Asked only to start vLLM for it (``serve``): whether it would skip runs
    its input checks, a second time after its subflow's. ``stage``: ``spec.build(config)``, when built."""
    stage = stage or spec.build(config)
    if stage.endpoint_field is None or StageRun(stage).life.would_skip():
        return None
    return stage.endpoint_field


def with_endpoints(spec: StageSpec, config: PipelineConfig, field: str, urls: list[str]) -> PipelineConfig:
    """The config with ``urls`` in ``field`` of the stage's section (the PipelineConfig section of its name)."""
    section = spec.section(config)
    return config.model_copy(update={spec.name: section.model_copy(update={field: urls})})


def run_subflow(spec: StageSpec, config: PipelineConfig, outcome: Outcome, results: dict[str, Any]) -> None:
    """The stage's flow as a subflow waiting for the stages it reads; its edge token into ``results``."""
    get_run_logger().info("%s: starting -> %s", spec.name, outcome.out_dir)
    outcome.started = time.time()
    upstream = [results[r] for r in spec.reads(config) if r in results]
    try:
        with failing(outcome):
            state = stage_flow(spec.name)(**spec.arguments(config), wait_for=upstream, return_state=True)
            results[spec.name] = edge_token(spec.name, state)
            state.result()  # raises the stage's own exception
    finally:
        outcome.seconds = time.time() - outcome.started


@contextlib.contextmanager
def failing(outcome: Outcome) -> Iterator[None]:
    """An error in the block is the stage's: recorded in its outcome for the summary, raised unchanged."""
    try:
        yield
    except BaseException as exc:
        outcome.status, outcome.reason = "failed", (str(exc).splitlines() or [type(exc).__name__])[0]
        raise


class StageDone:
    """Stands for a stage's finished subflow in ``wait_for``: the run graph's one edge per read.

    Prefect links a result to the run that returned it by object identity, and walks every value
    passed in ``wait_for`` and in the parameters. A manifest shares strings (``"complete"``, paths)
    with other stages' manifests and arguments, which drew five false edges (generate->vocab, ...);
    a fresh object linked to the state alone is found in nothing but the ``wait_for`` given it."""

    def __init__(self, stage: str) -> None:
        self.stage = stage


def edge_token(name: str, state: Any) -> StageDone:
    from prefect.utilities.engine import link_state_to_flow_run_result

    token = StageDone(name)
    link_state_to_flow_run_result(state, token)
    return token


def served_field(spec: StageSpec, config: PipelineConfig) -> str | None:
    """The field of the stage's section vLLM's URL goes into, None when nothing is to be served for it:
    ``serve`` unset, the stage not selected, blocked (its run_stage says so), asking no server, having
    nothing to do (``endpoint_field``), or given its endpoints by the recipe (``names_its_endpoints``)."""
    if config.serve is None or spec.name not in config.stages or missing_inputs(spec, config):
        return None
    stage = spec.build(config)
    if names_its_endpoints(stage, spec.section(config)):
        return None
    return endpoint_field(spec, config, stage)


def names_its_endpoints(stage: Any, section: Any) -> bool:
    """The recipe lists the stage's endpoints itself (generate's ``base_urls`` at a deployment of the
    target): they are asked, and ``serve`` serves only the stages that name none (and evaluate's drafter),
    rather than a local vLLM replacing the endpoints the recipe names. Asked before ``endpoint_field``,
    whose skip check would ask those endpoints for their model."""
    return stage.endpoint_field is not None and bool(getattr(section, stage.endpoint_field))


def field_to_serve(spec: StageSpec, config: PipelineConfig) -> str | None:
    """``served_field``, except that inputs the stage refuses start nothing: its subflow then fails
    with the stage's own error, in the run graph."""
    try:
        return served_field(spec, config)
    except Eagle3Error:
        return None


def served_for(
    spec: StageSpec, config: PipelineConfig, outcomes: dict[str, Outcome]
) -> contextlib.AbstractContextManager[PipelineConfig]:
    """``serving`` the stage where ``served_field`` says so (an input it refuses raises here)."""
    return serving(spec, config, served_field(spec, config), outcomes)


@contextlib.contextmanager
def serving(
    spec: StageSpec, config: PipelineConfig, field: str | None, outcomes: dict[str, Outcome]
) -> Iterator[PipelineConfig]:
    """Yield the config with vLLM serving the target, its URL in ``field``, while the stage runs, and
    stop vLLM afterwards, error or not; the config as it is when ``field`` is None."""
    if field is None:
        yield config
        return
    from eagle3_core.serve.vllm_server import VLLMServer

    logger, started = get_run_logger(), time.time()
    server = VLLMServer.for_target(config.target, config.serve, log_dir=config.layout.root / "logs")
    logger.info("starting vLLM for %s (%s)", config.target.path, server.start_estimate())
    with server:
        outcomes["serve"] = Outcome("serve", "ran", server.base_url, time.time() - started, started)
        logger.info("vLLM serves %s at %s (pid %s)", server.model, server.base_url, server.pid)
        yield with_endpoints(spec, config, field, [server.base_url])
    logger.info("vLLM stopped")


def publish_summary(config: PipelineConfig, outcomes: dict[str, Outcome], error: BaseException | None) -> None:
    """The run's ``pipeline-summary``: each stage's outcome, and why the run stopped when it did."""
    markdown = summary_markdown(config, outcomes)
    if error is not None:
        reason = error.message if isinstance(error, Eagle3Error) else f"{type(error).__name__}: {error}"
        markdown += f"\n\nfailed: {(reason.splitlines() or [''])[0]}"
    publish_markdown(markdown, config.out)


def publish_markdown(markdown: str, out: str) -> None:
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(markdown, key="pipeline-summary", description=f"eagle3 pipeline into {out}")
