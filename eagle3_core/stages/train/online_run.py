"""The stage side of train.mode online-vllm: the spool's place and budget, the engine, its figures.

``prepare`` checks the spool's disk and says before the run what the states would cost;
``engine_for_run`` starts the extraction engine beside the trainer (or uses the endpoint the
recipe names) and stops it when the trainer exits, error or not; ``details`` puts the engine's
and the trainer's figures (throughput, spool peak, waits, reuse or recompute) in the manifest.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from eagle3_core.contracts import sequences
from eagle3_core.errors import ConfigError
from eagle3_core.run.progress import Reporter
from eagle3_core.spool.folder import Spool, unit_bytes
from eagle3_core.spool.http import is_url
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.inputs import TrainInputs
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.storage import free_bytes, human

SPOOL = "spool"


def spool_dir(cfg: TrainConfig, out: Path) -> Path:
    """The folder the trainer reads: an endpoint folder, else its own (a URL's units are copied there)."""
    online = cfg.online_vllm
    return Path(folder_endpoint(cfg) or online.spool_dir or out / SPOOL)


def folder_endpoint(cfg: TrainConfig) -> str | None:
    """The endpoint when it names a spool folder (not a URL)."""
    endpoint = cfg.online_vllm.endpoint
    return None if is_url(endpoint) else endpoint


def prepare(cfg: TrainConfig, inputs: TrainInputs, out: Path, reporter: Reporter) -> None:
    """Check the spool's disk, give the trainer its spool, and state the cost before any step."""
    online, where = cfg.online_vllm, spool_dir(cfg, out)
    budget = int(online.spool_gb * 2**30)
    if is_url(online.endpoint):
        check_url_engine(online.endpoint, inputs)
    if folder_endpoint(cfg) is None:
        free = free_bytes(where) + (Spool(where).used_bytes() if where.exists() else 0)
        if budget > free:
            raise ConfigError(
                f"train.online_vllm.spool_gb is {online.spool_gb} GiB but only {human(free)} is free at {where}",
                path=str(where),
                fix="lower train.online_vllm.spool_gb, or set train.online_vllm.spool_dir on a larger disk",
            )
    elif not where.is_dir():
        raise ConfigError(
            f"no engine spool at {where}",
            path=str(where),
            fix="start one with `python -m eagle3_core.stages.train.online_engine serve --spool DIR ...`, "
            "or leave train.online_vllm.endpoint unset to let the stage start the engine",
        )
    inputs.spool = {"dir": str(where), "run_id": uuid.uuid4().hex, "timeout_s": online.wait_timeout_s}
    states = unit_bytes(inputs.tokens, inputs.hidden_size)
    verdict = (
        "the whole set fits: epochs after the first reuse it"
        if states <= budget
        else f"it does not fit: each of {cfg.epochs:g} epochs recomputes its states"
    )
    via = f"endpoint {online.endpoint}" if online.endpoint else f"{online.engine} engine"
    reporter.log(
        f"train: online-vllm via {via}; "
        f"the set's states take {human(states)}, spool budget {human(budget)} at {where}: {verdict}"
    )


def check_url_engine(url: str, inputs: TrainInputs) -> None:
    """Before any step: the engine at ``url`` answers and serves this target and these layers."""
    from eagle3_core.spool.folder import Requests
    from eagle3_core.spool.http import engine_status
    from eagle3_core.spool.producer import refuse_other_target

    engine = engine_status(url)
    asked = Requests.model_construct(target_path=inputs.target_path, layers=list(inputs.aux_layer_ids))
    refuse_other_target(asked, engine.get("target"), engine.get("layers"))


@contextlib.contextmanager
def engine_for_run(
    cfg: TrainConfig, target: TargetConfig, inputs: TrainInputs, out: Path, reporter: Reporter
) -> Iterator[dict]:
    """The engine for one trainer run: started (``yield`` gives its live figures) and stopped after,
    or nothing to start when the recipe names an endpoint."""
    from eagle3_core.spool.producer import EngineProducer
    from eagle3_core.stages.train.online_engine import build_engine

    figures: dict = {}
    if is_url(cfg.online_vllm.endpoint):
        with url_fetcher(cfg, inputs, out, figures):
            yield figures
        return
    if cfg.online_vllm.endpoint is not None:
        yield figures
        figures.update(Spool(spool_dir(cfg, out)).status())
        return
    longest = min(sequences.longest(inputs.sequences_dir), cfg.micro_batch_tokens)
    layers, n_layers = inputs.aux_layer_ids, int(inputs.target_config["num_hidden_layers"])
    producer = EngineProducer(
        spool_dir(cfg, out),
        lambda: build_engine(cfg.online_vllm, target, layers, n_layers, longest, Path(out) / "engine"),
    )
    reporter.log(
        f"train: starting the {cfg.online_vllm.engine} engine beside the trainer "
        f"(devices {cfg.online_vllm.engine_devices or 'inherited'})"
    )
    with producer:
        try:
            yield figures
        finally:
            figures.update(producer.figures())
    figures["engine_error"] = None if producer.error is None else str(producer.error)


@contextlib.contextmanager
def url_fetcher(cfg: TrainConfig, inputs: TrainInputs, out: Path, figures: dict) -> Iterator[None]:
    """A standing engine named by URL: its units are copied into the trainer's own spool."""
    from eagle3_core.spool.http import UnitFetcher, engine_status

    url = cfg.online_vllm.endpoint
    fetcher = UnitFetcher(url, spool_dir(cfg, out), inputs.spool["run_id"], cfg.online_vllm.wait_timeout_s)
    with fetcher:
        yield
    with contextlib.suppress(Exception):  # the engine's figures are a nicety once the run is over
        figures.update(engine_status(url))
    figures["engine_error"] = None if fetcher.error is None else str(fetcher.error)


def details(summary: dict, engine: dict, cfg: TrainConfig) -> dict:
    """The run's online figures for the manifest: engine throughput and peak, trainer waits, reuse."""
    spool = summary.get("spool") or {}
    forward_s = engine.get("forward_s") or 0.0
    return {
        "engine": cfg.online_vllm.engine,
        "endpoint": cfg.online_vllm.endpoint,
        "engine_startup_s": engine.get("startup_s"),
        "engine_tokens": engine.get("tokens"),
        "engine_tokens_per_s": round(engine["tokens"] / forward_s, 1) if forward_s else None,
        "engine_room_wait_s": engine.get("room_wait_s"),
        "spool_peak_bytes": engine.get("peak_bytes"),
        **spool,
    }


def clean(cfg: TrainConfig, out: Path) -> None:
    """After a complete run: the stage's own spool goes; in an endpoint's folder only this run's
    units and requests go (the engine's status stays its own). A URL's local copies are the stage's own."""
    where, own = spool_dir(cfg, out), folder_endpoint(cfg) is None
    Spool(where).clear(status=own)
    if own and where == out / SPOOL:
        shutil.rmtree(where, ignore_errors=True)
