"""`eagle3 extract`: sequences/ -> hidden/ (runs the extract flow)."""

from __future__ import annotations

import click

from eagle3_core.extract.config import ExtractConfig
from flows.cli.options import field_option, folder_option, run_stage


def _layers(value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        layers = [int(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"expected three comma-separated layer ids such as 2,16,29, got {value!r}") from None
    from eagle3_core.target import aux_layer_problem

    problem = aux_layer_problem(layers)
    if problem:
        raise click.BadParameter(problem)
    return layers


@click.command("extract")
@folder_option("--input", "sequences_dir", "sequences/ folder (from `eagle3 reconstruct`).")
@folder_option("--target", "target_path", "Local Hugging Face directory of the target model.")
@folder_option("--out", "out_dir", "hidden/ folder to write.")
@click.option(
    "--layers", default=None, help="Auxiliary layer ids low,mid,high in vLLM's counting (default 2,N//2,N-3)."
)
@field_option(ExtractConfig, "engine")
@field_option(ExtractConfig, "device")
@field_option(ExtractConfig, "max_tokens_per_batch")
@field_option(ExtractConfig, "shard_tokens")
@field_option(ExtractConfig, "vllm_tensor_parallel_size", "--tensor-parallel-size", "tensor_parallel_size")
@click.option("--trust-remote-code", is_flag=True, help="Let transformers/vLLM run the model's own code.")
def command(
    sequences_dir: str,
    target_path: str,
    out_dir: str,
    layers: str | None,
    engine: str,
    device: str,
    max_tokens_per_batch: int,
    shard_tokens: int,
    tensor_parallel_size: int,
    trust_remote_code: bool,
) -> None:
    """Store the target's low/mid/high and final hidden states for every token (bf16 safetensors)."""
    from eagle3_core.contracts.sequences import parts
    from eagle3_core.target import TargetConfig

    parts(sequences_dir)  # the input folder first: a wrong --input is not a layer error
    cfg = ExtractConfig(
        engine=engine,
        layers=_layers(layers),
        device=device,
        max_tokens_per_batch=max_tokens_per_batch,
        shard_tokens=shard_tokens,
        vllm_tensor_parallel_size=tensor_parallel_size,
    )
    target = TargetConfig(path=target_path, trust_remote_code=trust_remote_code)
    manifest = run_stage("extract", cfg=cfg, target=target, sequences_dir=sequences_dir, out_dir=out_dir)
    d = manifest.details
    click.echo(
        f"{manifest.counts['samples']:,} samples, {manifest.counts['tokens']:,} tokens, "
        f"{manifest.counts['shards']} shards ({d.get('shards_reused', 0)} reused); layers {d['layers']}, "
        f"H={d['hidden_size']}, padding {d['padding_share']:.1%}, engine {d['engine']} -> {out_dir}"
    )
