"""`eagle3 reconstruct`: generations/ -> sequences/ (runs the reconstruct flow)."""

from __future__ import annotations

import click

from eagle3_core.reconstruct.config import ReconstructConfig
from flows.cli.options import field_option, folder_option, run_stage

FAMILIES = ["kimi_k2_5", "qwen3", "deepseek_r1", "llama3"]


@click.command("reconstruct")
@folder_option("--input", "generations_dir", "generations/ folder (from `eagle3 generate`).")
@folder_option("--tokenizer", None, "Local directory of the target's tokenizer.")
@folder_option("--out", "out_dir", "sequences/ folder to write.")
@field_option(ReconstructConfig, "max_length")
@field_option(ReconstructConfig, "overlong")
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
@field_option(ReconstructConfig, "prefer")
@field_option(ReconstructConfig, "workers")
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
    from eagle3_core.reconstruct.recipes import target_from_recipe

    # Remote code runs only on this flag, whatever a recipe says.
    target = target_from_recipe(recipe, family, path=tokenizer, trust_remote_code=trust_remote_code)
    cfg = ReconstructConfig(max_length=max_length, overlong=overlong, prefer=prefer, workers=workers)
    manifest = run_stage("reconstruct", cfg=cfg, target=target, generations_dir=generations_dir, out_dir=out_dir)
    check = manifest.details["server_check"]
    rate = "n/a (no server ids)" if check["match_rate"] is None else f"{check['match_rate']:.2%} of {check['checked']}"
    click.echo(
        f"{manifest.counts.get('sequences', 0)} sequences, {manifest.counts.get('rejected', 0)} rejected "
        f"{manifest.details['reject_reasons'] or ''}, {manifest.counts.get('truncated', 0)} truncated; "
        f"server ids match: {rate} -> {out_dir}"
    )
