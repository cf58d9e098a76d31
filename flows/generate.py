"""The generate flow: probe, then one streaming task over every prompt, then the summary."""

from __future__ import annotations

from prefect import flow

from eagle3_core.generate.config import GenerateConfig
from eagle3_core.target import TargetConfig


@flow(name="generate", log_prints=True, validate_parameters=True)
def generate_flow(
    cfg: GenerateConfig, out: str, progress_bar: bool = False, target: TargetConfig | None = None
) -> dict:
    """Generate every prompt of ``cfg`` into ``out`` (accepted/, rejected/, manifest.json); with a
    ``target`` whose tokenizer is local, the probe runs the pre-flight suite on each endpoint first."""
    if cfg.source == "dataset":  # no server, so none of the three served tasks
        from tasks.generate_dataset import generate_from_dataset

        return generate_from_dataset(cfg, out).model_dump(mode="json")
    from eagle3_core.generate.stage import GenerateStage
    from eagle3_core.generate.terminal import Fanout, TerminalProgress
    from eagle3_core.lifecycle import StageRun
    from eagle3_core.reconstruct.preflight import generate_preflight
    from tasks.common import PrefectReporter
    from tasks.generate import PrefectLimits, endpoint_limit_name, ensure_limits, finish_run, open_run, stream_all

    reporter = PrefectReporter("generate")  # its log lines reach the terminal through Prefect's console
    shown = Fanout(reporter, TerminalProgress(echo_logs=False)) if progress_bar else reporter
    run = StageRun(GenerateStage(cfg, out, shown, preflight=generate_preflight(target)))
    finished = open_run(run)
    if finished is not None:
        return finished.model_dump(mode="json")
    with run.life.guard():  # the folder is open: a refusal here is recorded `failed` and lets it go
        ensure_limits(
            sorted({endpoint_limit_name(url) for url in cfg.base_urls}),
            cfg.max_concurrency if cfg.concurrency == "auto" else cfg.concurrency,
        )
    stream_all(run, PrefectLimits(cfg.base_urls))  # the driver: an error -> `failed`, an interrupt `running`
    return finish_run(run).model_dump(mode="json")
