"""`eagle3 reconstruct`: generations/ -> sequences/ (runs the reconstruct flow)."""

from __future__ import annotations

import click

from eagle3_core.contracts.details import ReconstructDetails
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.target.config import TargetConfig
from flows.cli.options import field_options, folder_option, run_stage, target_options


@click.command("reconstruct")
@folder_option("--input", "generations_dir", "generations/ folder (from `eagle3 generate`).")
@folder_option("--tokenizer", None, "Local directory of the target's tokenizer.")
@folder_option("--out", "out_dir", "sequences/ folder to write.")
@field_options(ReconstructConfig, "max_length", "overlong")
@target_options(TargetConfig)
@field_options(ReconstructConfig, "prefer", "workers")
def command(
    generations_dir: str,
    tokenizer: str,
    out_dir: str,
    family: str | None,
    recipe: str | None,
    trust_remote_code: bool,
    **fields,
) -> None:
    """Rebuild the exact token ids the target produced, think tokens in place, with a loss mask."""
    from eagle3_core.stages.reconstruct.recipes import target_from_recipe

    # Remote code runs only on this flag, whatever a recipe says.
    target = target_from_recipe(recipe, family, path=tokenizer, trust_remote_code=trust_remote_code)
    manifest = run_stage(
        "reconstruct", cfg=ReconstructConfig(**fields), target=target, generations_dir=generations_dir, out_dir=out_dir
    )
    details = ReconstructDetails.of(manifest)
    check = details.server_check
    if check.get("warning"):  # under 99%: the recipe is likely not the server's (reconstruct/server_check.py)
        click.echo(check["warning"], err=True)
    rate = "n/a (no server ids)" if check["match_rate"] is None else f"{check['match_rate']:.2%} of {check['checked']}"
    click.echo(
        f"{manifest.counts.get('sequences', 0)} sequences, {manifest.counts.get('rejected', 0)} rejected "
        f"{details.reject_reasons or ''}, {manifest.counts.get('truncated', 0)} truncated; "
        f"server ids match: {rate} -> {out_dir}"
    )
