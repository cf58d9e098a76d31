"""`eagle3 generate`: prompts -> reasoning-model answers, through the Prefect generate flow."""

from __future__ import annotations

import click


class ConcurrencyType(click.ParamType):
    name = "INT|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        try:
            number = int(value)
        except ValueError:
            self.fail(f"{value!r} is neither an integer nor 'auto'", param, ctx)
        if number < 1:
            self.fail("must be at least 1", param, ctx)
        return number


@click.command("generate")
@click.option(
    "--input",
    "input_",
    required=True,
    help="Prompts: .jsonl/.json/.parquet file or directory, or a Hugging Face dataset name.",
)
@click.option(
    "--base-url",
    "base_urls",
    multiple=True,
    default=(),
    help="OpenAI-compatible endpoint (http://host:port/v1); repeat for several. Not used with --source dataset.",
)
@click.option(
    "--source",
    type=click.Choice(["server", "dataset"]),
    default="server",
    show_default=True,
    help="server: the endpoints answer each prompt; dataset: each row's own final assistant turn is the answer.",
)
@click.option("--model", default=None, help="Served model name (default: the first one the endpoint lists).")
@click.option(
    "--out", required=True, type=click.Path(file_okay=False), help="Stage folder: accepted/, rejected/, manifest.json."
)
@click.option("--split", default="train", show_default=True, help="Dataset split (Hugging Face datasets).")
@click.option("--max-samples", type=click.IntRange(min=1), default=None, help="Take at most this many input rows.")
@click.option(
    "--concurrency",
    type=ConcurrencyType(),
    default="128",
    show_default=True,
    help="In-flight requests per endpoint, or 'auto' (AIMD).",
)
@click.option(
    "--max-concurrency",
    type=click.IntRange(min=1),
    default=128,
    show_default=True,
    help="Upper bound for --concurrency auto.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Deadline of one request, whole answer included; past it, a `timeout` retry.",
)
@click.option(
    "--max-retries", type=click.IntRange(min=0), default=5, show_default=True, help="Retries of a transient failure."
)
@click.option(
    "--max-tokens", type=click.IntRange(min=1), default=4096, show_default=True, help="Completion token limit."
)
@click.option(
    "--temperature", type=click.FloatRange(min=0), default=0.6, show_default=True, help="Sampling temperature."
)
@click.option(
    "--require-reasoning/--allow-empty-reasoning",
    default=True,
    show_default=True,
    help="Reject answers without reasoning (after retries).",
)
@click.option(
    "--shard-rows", type=click.IntRange(min=1), default=1000, show_default=True, help="Rows per Parquet shard."
)
@click.option(
    "--flush-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Flush a shard at least this often.",
)
@click.option(
    "--retry-initial-wait",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="First retry backoff (seconds).",
)
@click.option(
    "--limit-lease-seconds",
    type=click.FloatRange(min=60),
    default=60.0,
    show_default=True,
    help="How long a killed run keeps its share of the endpoint's global concurrency limit.",
)
@click.option(
    "--family",
    type=str,
    default=None,
    help="Chat family: its template variables and detokenizer settings (target.chat) come from the bundled recipe whose target.family it is (configs/*.yaml).",
)
@click.option(
    "--recipe",
    type=click.Path(dir_okay=False),
    default=None,
    help="Take target.chat from this recipe instead (reconstruct checks the same recipe against what generate recorded).",
)
@click.option("--allow-empty", is_flag=True, help="Accept an input that yields no rows (otherwise an error).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def command(
    input_,
    base_urls,
    source,
    model,
    out,
    split,
    max_samples,
    concurrency,
    max_concurrency,
    request_timeout,
    max_retries,
    max_tokens,
    temperature,
    require_reasoning,
    shard_rows,
    flush_seconds,
    retry_initial_wait,
    limit_lease_seconds,
    family,
    recipe,
    allow_empty,
    no_progress,
) -> None:
    """Send every prompt to the endpoints; keep each answer with its reasoning, resumably."""
    from eagle3_core.generate.config import GenerateConfig, PromptSource
    from eagle3_core.reconstruct.recipes import target_from_recipe

    cfg = GenerateConfig(
        prompts=PromptSource(input=input_, split=split, max_samples=max_samples),
        base_urls=list(base_urls),
        source=source,
        model=model,
        concurrency=concurrency,
        max_concurrency=max_concurrency,
        request_timeout=request_timeout,
        max_retries=max_retries,
        max_tokens=max_tokens,
        temperature=temperature,
        require_reasoning=require_reasoning,
        shard_rows=shard_rows,
        flush_seconds=flush_seconds,
        retry_initial_wait=retry_initial_wait,
        limit_lease_seconds=limit_lease_seconds,
        chat=target_from_recipe(recipe, family).chat,
        allow_empty=allow_empty,
    )
    from flows.generate import generate_flow

    manifest = generate_flow(cfg, str(out), progress_bar=not no_progress)
    counts = manifest["counts"]
    click.echo(
        f"generate: {counts['accepted']} accepted, {counts['rejected']} rejected, {counts['skipped']} skipped "
        f"of {counts['input']} rows -> {out}"
    )
