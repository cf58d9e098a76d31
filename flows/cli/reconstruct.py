"""`eagle3 reconstruct`: generations/ -> sequences/ (runs the reconstruct flow)."""

from __future__ import annotations

import click


@click.command("reconstruct")
@click.option(
    "--input",
    "generations_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="generations/ folder (from `eagle3 generate`).",
)
@click.option(
    "--tokenizer", required=True, type=click.Path(file_okay=False), help="Local directory of the target's tokenizer."
)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="sequences/ folder to write.")
@click.option(
    "--max-length",
    type=click.IntRange(min=8),
    default=4096,
    show_default=True,
    help="Longest sequence kept, in tokens.",
)
@click.option(
    "--overlong",
    type=click.Choice(["truncate", "drop"]),
    default="truncate",
    show_default=True,
    help="What to do with longer samples (counted either way).",
)
@click.option(
    "--family",
    type=str,
    default=None,
    help="Chat family: its token facts come from the bundled recipe whose target.family it is (configs/*.yaml).",
)
@click.option(
    "--recipe",
    type=click.Path(dir_okay=False),
    default=None,
    help="Take the target's token facts from this recipe's `target:` section instead.",
)
@click.option("--trust-remote-code", is_flag=True, help="Let the tokenizer run its own code (Kimi's needs it).")
@click.option(
    "--prefer",
    type=click.Choice(["server", "text"]),
    default="server",
    show_default=True,
    help="Train on the server's token ids when present, or on the re-tokenized text.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes (one shard each at a time).",
)
def command(
    generations_dir: str,
    tokenizer: str,
    out_dir: str,
    max_length: int,
    overlong: str,
    family: str | None,
    recipe: str | None,
    trust_remote_code: bool,
    prefer: str,
    workers: int,
) -> None:
    """Rebuild the exact token ids the target produced, think tokens in place, with a loss mask."""
    from eagle3_core.reconstruct.config import ReconstructConfig
    from eagle3_core.reconstruct.recipes import target_from_recipe
    from flows.reconstruct import reconstruct_flow

    # Remote code runs only on this flag, whatever a recipe says.
    target = target_from_recipe(recipe, family, path=tokenizer, trust_remote_code=trust_remote_code)
    cfg = ReconstructConfig(max_length=max_length, overlong=overlong, prefer=prefer, workers=workers)
    manifest = reconstruct_flow(cfg=cfg, target=target, generations_dir=generations_dir, out_dir=out_dir)
    check = manifest.details["server_check"]
    rate = "n/a (no server ids)" if check["match_rate"] is None else f"{check['match_rate']:.2%} of {check['checked']}"
    click.echo(
        f"{manifest.counts.get('sequences', 0)} sequences, {manifest.counts.get('rejected', 0)} rejected "
        f"{manifest.details['reject_reasons'] or ''}, {manifest.counts.get('truncated', 0)} truncated; "
        f"server ids match: {rate} -> {out_dir}"
    )
