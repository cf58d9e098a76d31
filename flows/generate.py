"""The generate flow: probe, then one task per batch of prompts, then the summary."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from eagle3_core.generate.config import GenerateConfig


@flow(name="generate", log_prints=True, validate_parameters=True)
def generate_flow(cfg: GenerateConfig, out: str, progress_bar: bool = False) -> dict:
    """Generate every prompt of ``cfg`` into ``out`` (accepted/, rejected/, manifest.json)."""
    from eagle3_core.generate.stage import GenerateRun
    from eagle3_core.generate.terminal import Fanout, TerminalProgress
    from tasks.common import PrefectReporter
    from tasks.generate import endpoint_limit_name, ensure_limits, finish_run, generate_batch, open_run

    reporter = PrefectReporter("generate")  # its log lines reach the terminal through Prefect's console
    run = GenerateRun(cfg, Path(out), Fanout(reporter, TerminalProgress(echo_logs=False)) if progress_bar else reporter)
    finished = open_run(run)
    if finished is not None:
        return finished.model_dump(mode="json")
    names = sorted({endpoint_limit_name(url) for url in cfg.base_urls})
    slots = ensure_limits(names, cfg.max_concurrency if cfg.concurrency == "auto" else cfg.concurrency)
    run.bound_in_flight(slots)
    try:
        for batch in run.batches():
            generate_batch(run, batch, names, slots)
    except BaseException as exc:
        run.fail(exc)
        raise
    return finish_run(run).model_dump(mode="json")
