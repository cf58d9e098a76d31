"""`eagle3 serve`: real vLLM on loopback for a local model (or the toy target) until Ctrl-C.

Not a stage, so no Prefect flow: it calls ``eagle3_core.serve`` directly.
"""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_PORT = 8000  # a server a person starts gets a port they can type (a config's None = a free one)
SERVE_LOGS = "runs/serve"
TOY_RECIPE = (
    Path(__file__).resolve().parents[2] / "configs" / "toy.yaml"
)  # the toy's flags without --config  # `eagle3 serve` has no run folder: its logs go here, under the working directory


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
    help="vLLM reasoning parser (kimi_k2, qwen3, deepseek_r1); default: the recipe's target.reasoning_parser "
    "(--config, else configs/toy.yaml's for the toy), none otherwise.",
)
@click.option(
    "--tool-call-parser",
    default=None,
    help="vLLM tool-call parser, passed with --enable-auto-tool-choice (vLLM refuses rows with `tools` without "
    "it); default: the recipe's target.tool_parser.vllm (--config, else configs/toy.yaml's for the toy).",
)
@click.option(
    "--served-model-name",
    default=None,
    help="Name clients send as `model` (default: `toy` for the toy, else the model folder's name).",
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
@click.option(
    "--trust-remote-code",
    is_flag=True,
    default=False,
    help="Let vLLM run the model folder's own code (Kimi-K2.5's tokenizer needs it); default: the recipe's "
    "target.trust_remote_code (--config), off without one.",
)
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
def command(
    model: str,
    port: int | None,
    host: str | None,
    reasoning_parser: str | None,
    tool_call_parser: str | None,
    served_model_name: str | None,
    max_model_len: int | None,
    config_path: str | None,
    python: str | None,
    trust_remote_code: bool,
    vllm_args: tuple[str, ...],
) -> None:
    """Start vLLM for MODEL on loopback, wait until it is healthy, serve until Ctrl-C, stop it cleanly.

    Arguments after `--` go to vLLM unchanged.
    """
    from eagle3_core.serve.vllm_server import VLLMServer

    serve_cfg, toy_cfg, target = _configs(config_path)
    if model == "toy":
        from eagle3_core.toy.build import build_toy_target

        model = str(build_toy_target(toy_cfg, _EchoReporter()))
        served_model_name = served_model_name or "toy"
    elif config_path is None:  # a model folder without a recipe: no family's flags but those given
        target = target.model_copy(update={"reasoning_parser": None, "tool_parser": None})
    target = _with_flags(target, model, reasoning_parser, tool_call_parser)
    if trust_remote_code:
        target = target.model_copy(update={"trust_remote_code": True})
    serve_cfg = serve_cfg.model_copy(update=_given(serve_cfg, host, port, max_model_len, served_model_name, python))
    server = VLLMServer.for_target(target, serve_cfg, log_dir=SERVE_LOGS, extra_args=list(vllm_args))
    reasoning_parser = target.reasoning_parser
    click.echo(f"starting vLLM for {model} ({server.start_estimate()}; log: written under {server.log_dir}) ...")
    _serve_until_stopped(server, reasoning_parser)


def _given(serve_cfg, host, port, max_model_len, served_model_name, python) -> dict:
    """The options a person gave, over the recipe's serve section (a typed port, else 8000)."""
    return {
        "host": host or serve_cfg.host,
        "port": port or serve_cfg.port or DEFAULT_PORT,
        "max_model_len": max_model_len or serve_cfg.max_model_len,
        "served_model_name": served_model_name or serve_cfg.served_model_name,
        "python": python or serve_cfg.python,
    }


def _serve_until_stopped(server, reasoning_parser: str | None) -> None:
    import signal
    import time

    # SIGTERM (a supervisor, `kill`) must stop vLLM as Ctrl-C does: turn it into the same exception.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with server:  # __exit__ stops vLLM (SIGTERM, then SIGKILL) whatever ends the block
            click.echo(
                f"vLLM ready in {server.startup_seconds:.0f} s: {server.base_url}  model={server.model}"
                f"  reasoning_parser={reasoning_parser}  tool_call_parser={server.tool_call_parser}  pid={server.pid}  log={server.log_path}"
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
    """The serve, toy and target sections of the recipe (configs/toy.yaml without one)."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.serve.config import ServeConfig
    from eagle3_core.toy.config import ToyTargetConfig

    cfg = PipelineConfig.from_yaml(config_path or TOY_RECIPE)
    return cfg.serve or ServeConfig(), cfg.toy or ToyTargetConfig(), cfg.target


def _with_flags(target, model: str, reasoning_parser: str | None, tool_call_parser: str | None):
    """The target served from ``model``, the parsers given on the command line over the recipe's."""
    from eagle3_core.target.config import ToolParsers

    update: dict = {"path": model}
    if reasoning_parser:
        update["reasoning_parser"] = None if reasoning_parser == "none" else reasoning_parser
    if tool_call_parser:
        tools = None if tool_call_parser == "none" else tool_call_parser
        update["tool_parser"] = (target.tool_parser or ToolParsers()).model_copy(update={"vllm": tools})
    return target.model_copy(update=update)


class _EchoReporter:
    """Prints the toy build's progress on one line."""

    def progress(self, stage: str, done: int, total: int | None, **figures) -> None:
        extra = " ".join(f"{k}={v}" for k, v in figures.items())
        click.echo(f"\r{stage}: {done}/{total} {extra}   ", nl=False, err=True)
        if done == total:
            click.echo("", err=True)

    def log(self, message: str) -> None:
        click.echo(message, err=True)
