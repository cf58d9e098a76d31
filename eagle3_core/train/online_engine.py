"""The engine side of train.mode online-vllm: an extraction engine serving a spool's requests.

``EngineProducer`` is the engine the train stage starts for one run (loaded at once, so its
start-up overlaps DeepSpeed's, closed when the run ends or fails); ``serve`` is the loop both
it and a standing engine run: wait for a requests file with a new run id, refuse another
target or other layers, write the units (``eagle3_core.extract.spool.produce``), and begin again
when a newer run replaces the one in progress. A standing engine behind an endpoint folder::

    python -m eagle3_core.train.online_engine serve --spool DIR --target PATH --layers a,b,c --max-tokens N

With ``--http HOST:PORT`` the same engine is also reachable by URL (``eagle3_core.extract.spool_http``):
the trainer names ``http://HOST:PORT`` as its endpoint and copies the units into a spool of its own.

The trainer side (what is requested, and reading it) is ``eagle3_core.train.online_vllm``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from eagle3_core.errors import ConfigError
from eagle3_core.extract.spool import POLL_S, Requests, Spool, SpoolFeeder, StatusFile, Stopped, produce

STATUS_EVERY_S = 1.0


def build_engine(cfg, target, layers: list[int], num_hidden_layers: int, longest: int, workdir: Path):
    """The extraction engine of ``cfg`` (an ``OnlineVllmConfig``) for ``target`` (a ``TargetConfig``)
    and samples of at most ``longest`` tokens."""
    from eagle3_core.extract.config import ExtractConfig

    target_path = target.require_path()
    if cfg.engine == "vllm":
        from eagle3_core.extract.vllm_engine import VllmEngine

        extract = ExtractConfig(
            engine="vllm",
            vllm_python=cfg.vllm_python,
            vllm_kv_cache_bytes=cfg.vllm_kv_cache_bytes,
            vllm_tensor_parallel_size=cfg.vllm_tensor_parallel_size,
        )
        return VllmEngine(
            extract,
            target,
            layers,
            num_hidden_layers,
            max_model_len=longest + 1,
            workdir=workdir,
            devices=cfg.engine_devices,
        )
    from eagle3_core.extract.hf_engine import TransformersEngine, load_target, resolve_device

    device = resolve_device(cfg.device)
    model = load_target(target_path, device, target.trust_remote_code)  # as extract loads it (Kimi needs it)
    return TransformersEngine(model, layers, device, cfg.max_tokens_per_batch)


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
    started, engine = time.monotonic(), None
    try:
        status.update(state="loading")
        try:
            engine = engine_factory()
        except Exception as exc:
            status.update(state="failed", error=f"{type(exc).__name__}: {exc}")
            raise
        status.update(state="waiting", startup_s=round(time.monotonic() - started, 1))
        served = ""
        while runs is None or runs > 0:
            requests = _next_requests(spool, served, stop)
            if requests is None:
                return
            served = requests.run_id
            status.update(run_id=served, units=0, tokens=0, peak_bytes=0, forward_s=0.0, room_wait_s=0.0, error=None)
            try:
                refuse_other_target(requests, target_path, layers)
                with _run_watch(spool, served, stop) as run_stop:
                    produce(spool, requests, engine, status, run_stop)
            except Stopped:
                if stop.is_set():
                    return
                continue
            except ConfigError as exc:  # this run's request is wrong; a standing engine serves the next
                status.update(state="failed", error=f"{type(exc).__name__}: {exc}")
                if runs is not None:
                    raise
                continue
            except Exception as exc:
                status.update(state="failed", error=f"{type(exc).__name__}: {exc}")
                raise
            runs = None if runs is None else runs - 1
    finally:
        beat_stop.set()
        if engine is not None:
            engine.close()


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


def main(argv: list[str] | None = None) -> int:
    """``python -m eagle3_core.train.online_engine serve --spool DIR --target PATH --layers a,b,c ...``:
    an engine standing behind a spool folder (``train.online_vllm.endpoint``), until interrupted."""
    import argparse
    import json

    from eagle3_core.extract.target_facts import read_target_facts
    from eagle3_core.target import TargetConfig
    from eagle3_core.train.config import OnlineVllmConfig

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--spool", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--layers", required=True, type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--max-tokens", type=int, required=True, help="Longest sample (train.micro_batch_tokens).")
    parser.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="Also serve the spool over HTTP (train.online_vllm.endpoint: http://HOST:PORT).",
    )
    parser.add_argument(
        "--config", default="{}", help="OnlineVllmConfig fields as JSON (engine, devices, vLLM sizing)."
    )
    args = parser.parse_args(argv)
    cfg = OnlineVllmConfig.model_validate(json.loads(args.config))
    n_layers = read_target_facts(args.target).num_hidden_layers
    spool = Spool(args.spool)
    spool.root.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    if args.http:
        from eagle3_core.extract.spool_http import serve_http

        server = serve_http(spool, args.http, args.target, args.layers)
        print(
            f"eagle3 engine: spool {spool.root} at http://{args.http.rpartition(':')[0] or '127.0.0.1'}:"
            f"{server.server_address[1]}",
            flush=True,
        )
    try:
        serve(
            spool,
            lambda: build_engine(
                cfg, TargetConfig(path=args.target), args.layers, n_layers, args.max_tokens, Path(args.spool) / "engine"
            ),
            stop,
            runs=None,
            target_path=args.target,
            layers=args.layers,
        )
    except KeyboardInterrupt:
        stop.set()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
