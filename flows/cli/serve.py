"""`eagle3 serve`: real vLLM on loopback for a local model (or the toy target) until Ctrl-C.

Not a stage, so no Prefect flow: it calls ``eagle3_core.serve`` directly.
"""

from __future__ import annotations

import click

DEFAULT_PORT = 8000  # a server a person starts gets a port they can type (a config's None = a free one)
SERVE_LOGS = "runs/serve"  # `eagle3 serve` has no run folder: its logs go here, under the working directory


@click.command("serve")
@click.option(
    "--model",
    "model",
    default="toy",
    show_default=True,
    help="Local Hugging Face model directory, or `toy` to build (or load the cached) toy target.",
)
@click.option("--port", type=int, default=None, help="Port on --host (default: the recipe's serve.port, else 8000).")
@click.option("--host", default=None, help="Bind address (default: the recipe's serve.host, else 127.0.0.1).")
@click.option(
    "--reasoning-parser",
    default=None,
    help="vLLM reasoning parser (kimi_k2, qwen3, deepseek_r1); default: kimi_k2 for the toy, none otherwise.",
)
@click.option(
    "--served-model-name",
    default=None,
    help="Name clients send as `model` (default: `toy` for the toy, else the path).",
)
@click.option(
    "--max-model-len", type=int, default=None, help="vLLM --max-model-len (default: the recipe's, else 2048)."
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="A pipeline recipe (e.g. configs/toy.yaml) whose `toy:` and `serve:` sections to use.",
)
@click.option(
    "--python", default=None, help="Python of the vLLM environment (default: $EAGLE3_VLLM_PYTHON, then .venv-vllm)."
)
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
def command(
    model: str,
    port: int | None,
    host: str | None,
    reasoning_parser: str | None,
    served_model_name: str | None,
    max_model_len: int | None,
    config_path: str | None,
    python: str | None,
    vllm_args: tuple[str, ...],
) -> None:
    """Start vLLM for MODEL on loopback, wait until it is healthy, serve until Ctrl-C, stop it cleanly.

    Arguments after `--` go to vLLM unchanged.
    """
    import signal
    import time

    from eagle3_core.serve.vllm_server import VLLMServer

    serve_cfg, toy_cfg, toy_parser = _configs(config_path)
    if model == "toy":
        from eagle3_core.toy.build import build_toy_target

        model = str(build_toy_target(toy_cfg, _EchoReporter()))
        reasoning_parser = reasoning_parser or toy_parser
        served_model_name = served_model_name or "toy"
    serve_cfg = serve_cfg.model_copy(
        update={
            "host": host or serve_cfg.host,
            "port": port or serve_cfg.port or DEFAULT_PORT,
            "max_model_len": max_model_len or serve_cfg.max_model_len,
            "served_model_name": served_model_name or serve_cfg.served_model_name,
            "python": python or serve_cfg.python,
        }
    )
    server = VLLMServer(
        model, serve_cfg, log_dir=SERVE_LOGS, reasoning_parser=reasoning_parser, extra_args=list(vllm_args)
    )
    click.echo(f"starting vLLM for {model} (log: written under {server.log_dir}) ...")
    # SIGTERM (a supervisor, `kill`) must stop vLLM as Ctrl-C does: turn it into the same exception.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with server:  # __exit__ stops vLLM (SIGTERM, then SIGKILL) whatever ends the block
            click.echo(
                f"vLLM ready in {server.startup_seconds:.0f} s: {server.base_url}  model={server.model}"
                f"  reasoning_parser={reasoning_parser}  pid={server.pid}  log={server.log_path}"
            )
            click.echo("press Ctrl-C to stop")
            while server.proc.poll() is None:
                time.sleep(1)
    except KeyboardInterrupt:
        click.echo("vLLM stopped")
        return
    raise click.ClickException(f"vLLM exited with code {server.proc.returncode}; log: {server.log_path}")


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _configs(config_path: str | None):
    """The serve and toy sections (and the toy's reasoning parser) of the recipe, or defaults."""
    from eagle3_core.serve.config import ServeConfig
    from eagle3_core.toy.config import ToyTargetConfig

    if config_path is None:
        return ServeConfig(), ToyTargetConfig(), "kimi_k2"  # the toy's K2.5 template
    from eagle3_core.config import PipelineConfig

    cfg = PipelineConfig.from_yaml(config_path)
    return cfg.serve or ServeConfig(), cfg.toy or ToyTargetConfig(), cfg.target.reasoning_parser


class _EchoReporter:
    """Prints the toy build's progress on one line."""

    def progress(self, stage: str, done: int, total: int | None, **figures) -> None:
        extra = " ".join(f"{k}={v}" for k, v in figures.items())
        click.echo(f"\r{stage}: {done}/{total} {extra}   ", nl=False, err=True)
        if done == total:
            click.echo("", err=True)

    def log(self, message: str) -> None:
        click.echo(message, err=True)
