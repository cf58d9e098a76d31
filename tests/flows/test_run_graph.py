"""The run graph the Prefect UI draws for a pipeline run, read back from Prefect's API: the declared
DAG's edges and nothing else.

The stages are stand-in flows (each writes a complete manifest into its folder and returns it, as a
real stage does), so every stage runs here in a second; what is under test is how the pipeline
links them, which is the same whatever a stage computes. The toy target task is real (its cache).
"""

from pathlib import Path

from eagle3_core.config import PipelineConfig
from eagle3_core.run.manifest import StageManifest, read_manifest, write_manifest
from eagle3_core.stages import BY_NAME, STAGES

ROOT = Path(__file__).resolve().parents[2]


def standin(name: str, config: PipelineConfig):
    """A flow named after the stage that leaves a complete manifest in its folder and returns it."""
    from prefect import flow

    @flow(name=name)
    def stage(**arguments):
        folder = BY_NAME[name].out(config)
        write_manifest(folder, StageManifest(stage=name, status="complete", config_hash="x"))
        return read_manifest(folder)

    return stage


def run_graph(flow_run_id) -> set[tuple[str, str]]:
    """Every edge between the pipeline run's children, from each child's recorded task inputs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterParentFlowRunId,
        TaskRunFilter,
        TaskRunFilterFlowRunId,
    )

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))
        )
        tasks = client.read_task_runs(
            task_run_filter=TaskRunFilter(flow_run_id=TaskRunFilterFlowRunId(any_=[flow_run_id]))
        )
        names = {run.id: client.read_flow(run.flow_id).name for run in runs}
        names |= {run.parent_task_run_id: names[run.id] for run in runs}
        names |= {t.id: t.name.split("-")[0] for t in tasks if t.id not in names}  # the toy task: toy-target-0 -> toy
    edges = set()
    for task in tasks:
        for inputs in task.task_inputs.values():
            edges |= {(names.get(i.id, str(i.id)), names[task.id]) for i in inputs if hasattr(i, "id")}
    return edges


def test_the_run_graph_is_the_declared_dag_and_nothing_else(prefect_api, toy_target, tmp_path, monkeypatch):
    import flows.pipeline

    config = PipelineConfig.from_yaml(ROOT / "configs" / "toy.yaml").model_copy(update={"out": str(tmp_path / "run")})
    config.generate.base_urls = ["http://127.0.0.1:9/v1"]  # never asked: the stand-in generates nothing
    config.train.mode = "offline"
    monkeypatch.setattr(flows.pipeline, "stage_flow", lambda name: standin(name, config))

    state = flows.pipeline.pipeline(config, return_state=True)

    assert state.is_completed(), state.message
    declared = {(read, spec.name) for spec in STAGES for read in spec.reads(config)}
    assert ("vocab", "extract") not in declared and ("generate", "train") not in declared  # what was drawn before
    assert run_graph(state.state_details.flow_run_id) == declared
