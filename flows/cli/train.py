"""`eagle3 train`: hidden/ (or sequences/) + vocab/ -> drafter/ (runs the train flow)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("train")
@click.option(
    "--input",
    "input_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="hidden/ folder (offline, from `eagle3 extract`), or sequences/ with --mode online.",
)
@click.option(
    "--target",
    "target_path",
    required=True,
    type=click.Path(file_okay=False),
    help="Local directory of the target model (config, embedding, lm_head).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="drafter/ folder to write (checkpoints/, metrics.jsonl, export/).",
)
@click.option(
    "--vocab",
    "vocab_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="vocab/ folder (from `eagle3 vocab`); default: vocab/ beside --input.",
)
@click.option(
    "--deepspeed-config",
    type=click.Path(dir_okay=False),
    default=None,
    help='Your DeepSpeed JSON config ("auto" values are filled in); default: ZeRO-2, AdamW, cosine.',
)
@click.option(
    "--mode",
    type=click.Choice(["offline", "online", "online-vllm", "auto"]),
    default="offline",
    show_default=True,
    help="offline reads hidden/; online runs the target inside the trainer over sequences/; online-vllm streams states from a vLLM engine over sequences/ through a bounded spool; auto is offline when --input is a complete hidden/, else online-vllm over it as sequences/.",
)
@click.option(
    "--spool-gb",
    type=click.FloatRange(min=0, min_open=True),
    default=16.0,
    show_default=True,
    help="online-vllm: the spool's byte budget (GiB); later epochs reuse the states it can keep, recompute the rest.",
)
@click.option(
    "--endpoint",
    default=None,
    help="online-vllm: an engine already serving, by its spool folder or its URL http://HOST:PORT (python -m eagle3_core.train.online_engine serve [--http HOST:PORT]); default: start one.",
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many optimizer steps (default: --epochs).",
)
@click.option(
    "--epochs",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Passes over the data.",
)
@click.option(
    "--ttt-steps", type=click.IntRange(min=1), default=7, show_default=True, help="Training-time-test unroll length."
)
@click.option(
    "--micro-batch-tokens",
    type=click.IntRange(min=1),
    default=16384,
    show_default=True,
    help="Tokens per micro-batch, padding included; a longer sample is cut to it.",
)
@click.option(
    "--packing/--no-packing",
    default=True,
    show_default=True,
    help="Pack several samples into one row (attention blocked at sample boundaries) instead of padding one a row.",
)
@click.option(
    "--lr", type=click.FloatRange(min=0, min_open=True), default=1e-4, show_default=True, help="Peak learning rate."
)
@click.option(
    "--checkpoint-every",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Save a checkpoint every N steps (and at the end).",
)
@click.option(
    "--layers", default=None, help="Auxiliary layer ids, e.g. 2,16,29 (default: what hidden/ was extracted with)."
)
@click.option(
    "--num-gpus",
    type=click.IntRange(min=1),
    default=None,
    help="GPUs for the deepspeed launcher (default: one process).",
)
@click.option(
    "--hostfile", type=click.Path(dir_okay=False), default=None, help="DeepSpeed hostfile for multi-node runs."
)
@click.option(
    "--init-from",
    type=click.Path(),
    default=None,
    help="Start from an earlier drafter's weights (its drafter/ or export/ folder).",
)
@click.option(
    "--report-to",
    multiple=True,
    type=click.Choice(["tensorboard", "wandb", "mlflow", "none"]),
    default=("tensorboard",),
    show_default=True,
    help="Experiment trackers rank 0 logs each step to (repeat for several; `none` for none); wandb and mlflow: pip install 'eagle3[tracking]'.",
)
def command(
    input_dir: str,
    target_path: str,
    out_dir: str,
    vocab_dir: str | None,
    deepspeed_config: str | None,
    mode: str,
    spool_gb: float,
    endpoint: str | None,
    max_steps: int | None,
    epochs: float,
    ttt_steps: int,
    micro_batch_tokens: int,
    packing: bool,
    lr: float,
    checkpoint_every: int,
    layers: str | None,
    num_gpus: int | None,
    hostfile: str | None,
    init_from: str | None,
    report_to: tuple[str, ...],
) -> None:
    """Train the EAGLE-3 drafter with DeepSpeed and export it for vLLM / SGLang."""
    from eagle3_core.target import TargetConfig
    from eagle3_core.train.config import OnlineVllmConfig, TrainConfig
    from flows.train import train_flow

    cfg = TrainConfig(
        mode=mode,
        max_steps=max_steps,
        epochs=epochs,
        ttt_steps=ttt_steps,
        lr=lr,
        micro_batch_tokens=micro_batch_tokens,
        packing=packing,
        checkpoint_every=checkpoint_every,
        deepspeed_config=deepspeed_config,
        num_gpus=num_gpus,
        hostfile=hostfile,
        init_from=init_from,
        online_vllm=OnlineVllmConfig(spool_gb=spool_gb, endpoint=endpoint),
        report_to=trackers(report_to),
    )
    target = TargetConfig(path=target_path, aux_layer_ids=parse_layers(layers))
    vocab_dir = vocab_dir or str(Path(input_dir).parent / "vocab")
    hidden, sequences = (input_dir, None) if reads_hidden(mode, input_dir) else (None, input_dir)
    manifest = train_flow(
        cfg=cfg, target=target, hidden_dir=hidden, vocab_dir=vocab_dir, out_dir=out_dir, sequences_dir=sequences
    )
    d = manifest.details
    click.echo(
        f"{manifest.counts['steps']} steps; held-out simulated acceptance length "
        f"{d.get('sim_acceptance_length_initial')} -> {d.get('sim_acceptance_length_final')}; "
        f"export: {Path(out_dir) / 'export'}"
    )


def trackers(names: tuple[str, ...]) -> list[str]:
    return [name for name in dict.fromkeys(names) if name != "none"]


def parse_layers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        layers = [int(x) for x in text.split(",")]
    except ValueError:
        raise click.BadParameter(f"expected three integers like 2,16,29, got {text!r}", param_hint="--layers") from None
    from eagle3_core.target import aux_layer_problem

    problem = aux_layer_problem(layers)
    if problem:
        raise click.BadParameter(problem, param_hint="--layers")
    return layers


def reads_hidden(mode: str, input_dir: str) -> bool:
    """Whether --input is hidden/ (offline, or auto given a complete hidden/) rather than sequences/."""
    from eagle3_core.train.sources import hidden_is_complete

    return mode == "offline" or (mode == "auto" and hidden_is_complete(input_dir))
