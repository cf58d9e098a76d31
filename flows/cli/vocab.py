"""`eagle3 vocab`: sequences/ -> vocab/ (runs the vocab flow)."""

from __future__ import annotations

import click

from eagle3_core.contracts.details import VocabDetails
from eagle3_core.stages.vocab.config import VocabConfig
from eagle3_core.target.config import TargetConfig
from flows.cli.options import field_option, folder_option, run_stage, target_options


@click.command("vocab")
@folder_option("--input", "sequences_dir", "sequences/ folder (from `eagle3 reconstruct`).")
@folder_option("--tokenizer", None, "Local directory of the target (tokenizer; config.json for the vocab size).")
@folder_option("--out", "out_dir", "vocab/ folder to write.")
@field_option(VocabConfig, "draft_vocab_size")
@target_options(TargetConfig)
def command(
    sequences_dir: str,
    tokenizer: str,
    out_dir: str,
    family: str | None,
    recipe: str | None,
    trust_remote_code: bool,
    **fields,
) -> None:
    """Pick the draft vocabulary: the most frequent supervised target tokens."""
    from eagle3_core.stages.reconstruct.recipes import target_from_recipe

    target = target_from_recipe(recipe, family, path=tokenizer, trust_remote_code=trust_remote_code)
    manifest = run_stage(
        "vocab",
        cfg=VocabConfig(**fields),
        target=target,
        sequences_dir=sequences_dir,
        out_dir=out_dir,
    )
    d = VocabDetails.of(manifest)
    click.echo(
        f"draft vocab {d.draft_vocab_size} of {d.target_vocab_size} ids covers {d.coverage:.2%} "
        f"of {manifest.counts['supervised_tokens']} supervised tokens -> {out_dir}"
    )
