"""A standing engine for train.mode online-vllm: the extraction engine behind a spool, until stopped.

``build_engine`` makes the engine of an ``OnlineVllmConfig`` (the vLLM or transformers engine of
``eagle3_core.states.engines``, extract's own); ``eagle3_core.spool.producer.serve`` runs it. A standing engine behind an
endpoint folder::

    python -m eagle3_core.stages.train.online_engine serve --spool DIR --target PATH --layers a,b,c --max-tokens N

With ``--http HOST:PORT`` the same engine is also reachable by URL (``eagle3_core.spool.http``):
the trainer names ``http://HOST:PORT`` as its endpoint and copies the units into a spool of its own.

The trainer side (what is requested, and reading it) is ``eagle3_core.stages.train.online_vllm``.
"""

from __future__ import annotations

import threading
from pathlib import Path

from eagle3_core.spool.folder import Spool
from eagle3_core.spool.producer import serve


def build_engine(cfg, target, layers: list[int], num_hidden_layers: int, longest: int, workdir: Path):
    """The extraction engine of ``cfg`` (an ``OnlineVllmConfig``) for ``target`` (a ``TargetConfig``)
    and samples of at most ``longest`` tokens: ``engines.build``'s, as extract builds its own."""
    from eagle3_core.states.engines.build import build_engine as build

    return build(
        cfg.engine, target, layers, num_hidden_layers, longest, workdir,
        vllm=cfg.vllm_options(), device=cfg.device, max_tokens_per_batch=cfg.max_tokens_per_batch, devices=cfg.engine_devices,
    )  # fmt: skip


def parser():
    import argparse

    found = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    found.add_argument("command", choices=["serve"])
    found.add_argument("--spool", required=True)
    found.add_argument("--target", required=True)
    found.add_argument("--trust-remote-code", action="store_true", help="The target ships its own code (Kimi's).")
    found.add_argument("--layers", required=True, type=lambda s: [int(x) for x in s.split(",")])
    found.add_argument("--max-tokens", type=int, required=True, help="Longest sample (train.micro_batch_tokens).")
    found.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="Also serve the spool over HTTP (train.online_vllm.endpoint: http://HOST:PORT).",
    )
    found.add_argument("--config", default="{}", help="OnlineVllmConfig fields as JSON (engine, devices, vLLM sizing).")
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m eagle3_core.stages.train.online_engine serve --spool DIR --target PATH --layers a,b,c ...``:
    an engine standing behind a spool folder (``train.online_vllm.endpoint``), until interrupted."""
    import functools
    import json

    from eagle3_core.contracts.target import read_target_facts
    from eagle3_core.stages.train.config import OnlineVllmConfig
    from eagle3_core.target.config import TargetConfig

    args = parser().parse_args(argv)
    cfg = OnlineVllmConfig.model_validate(json.loads(args.config))
    target = TargetConfig(path=args.target, trust_remote_code=args.trust_remote_code)
    n_layers = read_target_facts(args.target).num_hidden_layers
    spool = Spool(args.spool)
    spool.root.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    if args.http:
        serve_by_url(spool, args.http, args.target, args.layers)
    try:
        factory = functools.partial(
            build_engine, cfg, target, args.layers, n_layers, args.max_tokens, Path(args.spool) / "engine"
        )
        serve(spool, factory, stop, runs=None, target_path=args.target, layers=args.layers)
    except KeyboardInterrupt:
        stop.set()
    return 0


def serve_by_url(spool: Spool, address: str, target_path: str, layers: list[int]) -> None:
    """The spool behind ``HOST:PORT`` too, and the URL it is reached at, printed."""
    from eagle3_core.spool.http import serve_http

    server = serve_http(spool, address, target_path, layers)
    host = address.rpartition(":")[0] or "127.0.0.1"
    print(f"eagle3 engine: spool {spool.root} at http://{host}:{server.server_address[1]}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
