"""`eagle3 train`: hidden/ (or sequences/) + vocab/ -> drafter/ (runs the train flow).

Every option that sets a config field is built from it (``options.field_option``): its default,
help and bounds are the field's.
"""

from __future__ import annotations

from pathlib import Path

import click

from eagle3_core.contracts.details import TrainDetails
from eagle3_core.stages.train.config import OnlineVllmConfig, TrainConfig
from eagle3_core.target.config import TargetConfig
from flows.cli.options import (
    field_option,
    field_options,
    folder_option,
    layers_option,
    parse_layers,
    run_stage,
    target_options,
)

# TrainConfig fields set as they are, each its own --option
FIELDS = ("max_steps", "epochs", "ttt_steps", "micro_batch_tokens", "lr", "checkpoint_every", "num_gpus", "init_from")
ONLINE_FIELDS = ("spool_gb", "endpoint")  # OnlineVllmConfig's


@click.command("train")
@folder_option(
    "--input",
    "input_dir",
    "hidden/ folder (offline, from `eagle3 extract`), or sequences/ with --mode online, online-vllm or auto.",
)
@folder_option("--target", "target_path", "Local directory of the target model (config, embedding, lm_head).")
@folder_option("--out", "out_dir", "drafter/ folder to write (checkpoints/, metrics.jsonl, export/).")
@folder_option(
    "--vocab", "vocab_dir", "vocab/ folder (from `eagle3 vocab`); default: vocab/ beside --input.", required=False
)
@field_option(TrainConfig, "deepspeed_config", type=click.Path(dir_okay=False))
@field_option(TrainConfig, "mode")
@field_options(OnlineVllmConfig, *ONLINE_FIELDS)
@field_options(TrainConfig, *FIELDS)
@field_option(TrainConfig, "packing", "--packing/--no-packing")
@layers_option(
    TargetConfig, "aux_layer_ids", help="Auxiliary layer ids, e.g. 2,16,29 (default: what hidden/ was extracted with)."
)
@field_option(TrainConfig, "hostfile", type=click.Path(dir_okay=False))
@target_options(TargetConfig)
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
    layers: str | None,
    family: str | None,
    recipe: str | None,
    trust_remote_code: bool,
    **fields,
) -> None:
    """Train the drafter with DeepSpeed and export it for vLLM / SGLang."""
    from eagle3_core.stages.reconstruct.recipes import target_from_recipe

    online = OnlineVllmConfig(**{name: fields.pop(name) for name in ONLINE_FIELDS})
    report_to = trackers(fields.pop("report_to"))
    cfg = TrainConfig(**fields, report_to=report_to, online_vllm=online)
    given = {"aux_layer_ids": parse_layers(layers)} if layers else {}  # else the recipe's, else hidden/'s
    target = target_from_recipe(recipe, family, path=target_path, trust_remote_code=trust_remote_code, **given)
    hidden, sequences = input_folders(cfg.mode, input_dir)
    manifest = run_stage(
        "train",
        cfg=cfg,
        target=target,
        hidden_dir=hidden,
        vocab_dir=vocab_dir or str(Path(input_dir).parent / "vocab"),
        out_dir=out_dir,
        sequences_dir=sequences,
    )
    d = TrainDetails.of(manifest)
    click.echo(
        f"{manifest.counts['steps']} steps; held-out simulated acceptance length "
        f"{d.sim_acceptance_length_initial} -> {d.sim_acceptance_length_final}; "
        f"export: {Path(out_dir) / 'export'}"
    )


def input_folders(mode: str, input_dir: str) -> tuple[str | None, str | None]:
    """(hidden_dir, sequences_dir): --input is hidden/ offline, sequences/ online; in auto, hidden/
    when it is extract's complete folder (the stage then trains offline on it), else sequences/."""
    from eagle3_core.stages.train.plan import decide

    return decide(mode, hidden_dir=input_dir).input_folders(input_dir)


def trackers(names: tuple[str, ...]) -> list[str]:
    return [name for name in dict.fromkeys(names) if name != "none"]
