"""`eagle3 extract`: sequences/ -> hidden/ (runs the extract flow)."""

from __future__ import annotations

import click

from eagle3_core.contracts.details import ExtractDetails
from eagle3_core.stages.extract.config import ExtractConfig
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


@click.command("extract")
@folder_option("--input", "sequences_dir", "sequences/ folder (from `eagle3 reconstruct`).")
@folder_option("--target", "target_path", "Local Hugging Face directory of the target model.")
@folder_option("--out", "out_dir", "hidden/ folder to write.")
@layers_option(ExtractConfig, "layers")
@field_options(ExtractConfig, "engine", "device", "max_tokens_per_batch", "shard_tokens")
@field_option(ExtractConfig, "vllm_tensor_parallel_size", "--tensor-parallel-size")
@target_options(TargetConfig)
def command(
    sequences_dir: str,
    target_path: str,
    out_dir: str,
    layers: str | None,
    family: str | None,
    recipe: str | None,
    trust_remote_code: bool,
    **fields,
) -> None:
    """Store the target's low/mid/high and final hidden states for every token (bf16 safetensors)."""
    from eagle3_core.contracts.sequences import parts
    from eagle3_core.stages.reconstruct.recipes import target_from_recipe

    parts(sequences_dir)  # the input folder first: a wrong --input is not a config error
    cfg = ExtractConfig(**fields, layers=parse_layers(layers))
    target = target_from_recipe(recipe, family, path=target_path, trust_remote_code=trust_remote_code)
    manifest = run_stage("extract", cfg=cfg, target=target, sequences_dir=sequences_dir, out_dir=out_dir)
    d = ExtractDetails.of(manifest)
    click.echo(
        f"{manifest.counts['samples']:,} samples, {manifest.counts['tokens']:,} tokens, "
        f"{manifest.counts['shards']} shards ({d.shards_reused} reused); layers {d.layers}, "
        f"H={d.hidden_size}, padding {d.padding_share:.1%}, engine {d.engine} -> {out_dir}"
    )
