"""`eagle3 extract`: sequences/ -> hidden/ (runs the extract flow)."""

from __future__ import annotations

import click


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
@click.option(
    "--input",
    "sequences_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="sequences/ folder (from `eagle3 reconstruct`).",
)
@click.option(
    "--target",
    "target_path",
    required=True,
    type=click.Path(file_okay=False),
    help="Local Hugging Face directory of the target model.",
)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="hidden/ folder to write.")
@click.option(
    "--layers", default=None, help="Auxiliary layer ids low,mid,high in vLLM's counting (default 2,N//2,N-3)."
)
@click.option(
    "--engine",
    type=click.Choice(["transformers", "vllm"]),
    default="transformers",
    show_default=True,
    help="transformers for targets that fit; vllm for targets only a serving engine holds.",
)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N (transformers engine).")
@click.option(
    "--max-tokens-per-batch",
    type=click.IntRange(min=1),
    default=16384,
    show_default=True,
    help="Token budget per forward batch, padding included.",
)
@click.option(
    "--shard-tokens",
    type=click.IntRange(min=1),
    default=65536,
    show_default=True,
    help="Tokens per shard (the unit of resume).",
)
@click.option(
    "--tensor-parallel-size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="GPUs vLLM shards the target over (engine vllm).",
)
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
    from eagle3_core.extract.config import ExtractConfig
    from eagle3_core.target import TargetConfig
    from flows.extract import extract_flow

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
    manifest = extract_flow(cfg=cfg, target=target, sequences_dir=sequences_dir, out_dir=out_dir)
    d = manifest.details
    click.echo(
        f"{manifest.counts['samples']:,} samples, {manifest.counts['tokens']:,} tokens, "
        f"{manifest.counts['shards']} shards ({d.get('shards_reused', 0)} reused); layers {d['layers']}, "
        f"H={d['hidden_size']}, padding {d['padding_share']:.1%}, engine {d['engine']} -> {out_dir}"
    )
