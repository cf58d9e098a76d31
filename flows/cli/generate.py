"""`eagle3 generate`: prompts -> reasoning-model answers, through the generate stage's Prefect flow."""

from __future__ import annotations

import os

import click

from eagle3_core.contracts.details import GenerateDetails
from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.terminal import PROGRESS_ENV
from flows.cli.options import field_option, field_options, folder_option, recipe_options, run_stage

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
@field_option(PromptSource, "input", "--input", "input_")
@field_option(GenerateConfig, "base_urls", "--base-url", "base_urls", multiple=True)
@field_option(GenerateConfig, "source")
@field_option(GenerateConfig, "turns")
@field_option(GenerateConfig, "model")
@folder_option("--out", "out_dir", "Stage folder: accepted/, rejected/, manifest.json.")
@field_option(PromptSource, "split")
@field_option(PromptSource, "max_samples")
@field_option(GenerateConfig, "concurrency", type=ConcurrencyType())
@field_options(GenerateConfig, *FIELDS)
@field_option(GenerateConfig, "require_reasoning", "--require-reasoning/--allow-empty-reasoning")
@recipe_options("its template variables and detokenizer settings (target.chat)", "target.chat")
@field_option(GenerateConfig, "allow_empty")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def command(input_, base_urls, out_dir, split, max_samples, family, recipe, no_progress, **fields) -> None:
    """Send every prompt to the endpoints; keep each answer with its reasoning, resumably."""
    from eagle3_core.stages.reconstruct.recipes import target_from_recipe

    target = target_from_recipe(recipe, family)  # with a local target.path, the probe runs the pre-flight suite
    cfg = GenerateConfig(
        **fields, prompts=PromptSource(input=input_, split=split, max_samples=max_samples), base_urls=list(base_urls)
    ).with_target(target)
    if no_progress:
        os.environ[PROGRESS_ENV] = "0"  # a terminal setting: the stage reads it, no flow parameter carries it
    manifest = run_stage("generate", cfg=cfg, out_dir=out_dir, target=target)
    counts = manifest.counts
    reasons = GenerateDetails.of(manifest).reject_reasons or {}
    why = f" ({', '.join(f'{r}: {n}' for r, n in sorted(reasons.items()))})" if reasons else ""
    click.echo(
        f"generate: {counts['accepted']} accepted, {counts['rejected']} rejected{why}, {counts['skipped']} skipped "
        f"of {counts['input']} rows -> {out_dir}"
    )
