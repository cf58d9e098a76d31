"""`eagle3 generate`: prompts -> reasoning-model answers, through the Prefect generate flow."""

from __future__ import annotations

import click

from eagle3_core.generate.config import GenerateConfig, PromptSource
from flows.cli.options import field_option, field_options, recipe_options

# GenerateConfig fields set as they are, each its own --option (default, help, bounds: the field's)
FIELDS = ("max_concurrency", "request_timeout", "max_retries", "max_tokens", "temperature", "shard_rows")
FIELDS += ("flush_seconds", "retry_initial_wait", "limit_lease_seconds")


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
@field_option(GenerateConfig, "source")
@field_option(GenerateConfig, "turns")
@field_option(GenerateConfig, "model")
@click.option(
    "--out", required=True, type=click.Path(file_okay=False), help="Stage folder: accepted/, rejected/, manifest.json."
)
@field_option(PromptSource, "split")
@field_option(PromptSource, "max_samples")
@field_option(GenerateConfig, "concurrency", type=ConcurrencyType())
@field_options(GenerateConfig, *FIELDS)
@field_option(GenerateConfig, "require_reasoning", "--require-reasoning/--allow-empty-reasoning")
@recipe_options("its template variables and detokenizer settings (target.chat)", "target.chat")
@field_option(GenerateConfig, "allow_empty")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def command(input_, base_urls, out, split, max_samples, family, recipe, no_progress, **fields) -> None:
    """Send every prompt to the endpoints; keep each answer with its reasoning, resumably."""
    from eagle3_core.reconstruct.recipes import target_from_recipe
    from flows.generate import generate_flow

    target = target_from_recipe(recipe, family)  # with a local target.path, the probe runs the pre-flight suite
    cfg = GenerateConfig(
        **fields,
        prompts=PromptSource(input=input_, split=split, max_samples=max_samples),
        base_urls=list(base_urls),
        chat=target.chat,
    )
    manifest = generate_flow(cfg, str(out), progress_bar=not no_progress, target=target)
    counts = manifest["counts"]
    click.echo(
        f"generate: {counts['accepted']} accepted, {counts['rejected']} rejected, {counts['skipped']} skipped "
        f"of {counts['input']} rows -> {out}"
    )
