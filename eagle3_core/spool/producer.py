"""The engine side of a spool: serve a spool's requests with an extraction engine, run after run.

``serve`` is the loop both a run's own engine and a standing engine run: wait for a requests
file with a new run id, refuse another target or other layers (``refuse_other_target``), write
the units (``folder.produce``), and begin again when a newer run replaces the one in progress.
``EngineProducer`` is the engine a train stage starts for one run (loaded at once, so its
start-up overlaps DeepSpeed's, closed when the run ends or fails). The engine itself comes from
a factory, so this package knows no engine (they live in ``eagle3_core.stages.extract``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from eagle3_core.errors import ConfigError
from eagle3_core.spool.folder import POLL_S, Requests, Spool, SpoolFeeder, StatusFile, Stopped, produce

STATUS_EVERY_S = 1.0


def serve(
    spool: Spool,
    engine_factory: Callable[[], object],
    stop: threading.Event,
    runs: int | None = 1,
    target_path: str | None = None,
    layers: list[int] | None = None,
) -> None:
    """Load the engine, then serve the spool's requests, run after run (``runs`` None = until stopped).

    A new run (a requests file with another run id) stops the one in progress: the trainer that
    wrote it is the only reader left.
    """
    status = StatusFile(spool, run_id="")
    beat_stop = threading.Event()
    status.beat_until(beat_stop)
    engine = None
    try:
        engine = _load(engine_factory, status)
        served = ""
        while runs is None or runs > 0:
            requests = _next_requests(spool, served, stop)
            if requests is None:
                return
            served = requests.run_id
            outcome = _serve_run(
                spool, requests, engine, status, stop, standing=runs is None, owner=(target_path, layers)
            )
            if outcome == "stopped":
                return
            if outcome == "done" and runs is not None:
                runs -= 1
    finally:
        beat_stop.set()
        if engine is not None:
            engine.close()


def _load(engine_factory: Callable[[], object], status: StatusFile):
    """The engine, its start-up time in the status (or its failure, re-raised)."""
    started = time.monotonic()
    status.update(state="loading")
    try:
        engine = engine_factory()
    except Exception as exc:
        status.update(state="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    status.update(state="waiting", startup_s=round(time.monotonic() - started, 1))
    return engine


def _serve_run(spool, requests: Requests, engine, status: StatusFile, stop, standing: bool, owner) -> str:
    """One run's units: "done", "replaced" (a newer run came, or a standing engine refused this one's
    request) or "stopped" (the server stops); any other failure is in the status and raised."""
    status.update(run_id=requests.run_id, units=0, tokens=0, peak_bytes=0, forward_s=0.0, room_wait_s=0.0, error=None)
    try:
        refuse_other_target(requests, *owner)
        with _run_watch(spool, requests.run_id, stop) as run_stop:
            produce(spool, requests, engine, status, run_stop)
    except Stopped:
        return "stopped" if stop.is_set() else "replaced"
    except ConfigError as exc:  # this run's request is wrong; a standing engine serves the next
        status.update(state="failed", error=f"{type(exc).__name__}: {exc}")
        if not standing:
            raise
        return "replaced"
    except Exception as exc:
        status.update(state="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    return "done"


def _next_requests(spool: Spool, served: str, stop: threading.Event) -> Requests | None:
    while not stop.is_set():
        try:
            requests = spool.read_requests()
        except (OSError, ValueError):
            requests = None
        if requests is not None and requests.run_id != served:
            return requests
        stop.wait(POLL_S)
    return None


def refuse_other_target(requests: Requests, target_path: str | None, layers: list[int] | None) -> None:
    if target_path is not None and Path(requests.target_path).resolve() != Path(target_path).resolve():
        raise ConfigError(
            f"this engine serves {target_path}, the trainer asks for {requests.target_path}",
            fix="point train.online_vllm.endpoint at an engine started for the same target",
        )
    if layers is not None and list(requests.layers) != list(layers):
        raise ConfigError(
            f"this engine captures layers {layers}, the trainer asks for {requests.layers}",
            fix="start the engine with the trainer's aux layer ids (--layers)",
        )


class _run_watch:
    """An event set when the whole server stops or a newer run replaces this one."""

    def __init__(self, spool: Spool, run_id: str, stop: threading.Event) -> None:
        self.spool, self.run_id, self.stop = spool, run_id, stop
        self.run_stop, self._done = threading.Event(), threading.Event()

    def __enter__(self) -> threading.Event:
        threading.Thread(target=self._watch, name="eagle3-spool-watch", daemon=True).start()
        return self.run_stop

    def _watch(self) -> None:
        while not self._done.wait(STATUS_EVERY_S):
            try:
                current = self.spool.read_requests()
            except (OSError, ValueError):
                continue
            if self.stop.is_set() or (current is not None and current.run_id != self.run_id):
                self.run_stop.set()
                return

    def __exit__(self, *exc) -> None:
        self._done.set()


class EngineProducer(SpoolFeeder):
    """The engine the stage starts for one run: loads at once (its start-up overlaps the trainer's),
    serves that run's requests, and is closed when the run ends or fails."""

    def __init__(self, spool_dir: str | Path, engine_factory: Callable[[], object]) -> None:
        super().__init__(spool_dir, "eagle3-spool-producer")
        self.factory = engine_factory

    def _run(self) -> None:
        try:
            serve(self.spool, self.factory, self.stop, runs=1)
        except BaseException as exc:  # noqa: BLE001 - kept for the stage; the trainer sees producer.json
            self.error = exc

    def figures(self) -> dict:
        return self.spool.status()
