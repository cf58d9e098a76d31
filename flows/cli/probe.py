"""`eagle3 probe --recipe FILE --base-url URL`: the pre-flight suite of a recipe against a live server.

Not a stage, so no Prefect flow: it calls ``eagle3_core.preflight.suite`` directly.
"""

from __future__ import annotations

import click

from flows.cli.options import folder_option


@click.command("probe")
@click.option(
    "--recipe",
    required=True,
    type=click.Path(dir_okay=False),
    help="The pipeline recipe (e.g. configs/qwen3.yaml): its target and generate sections are used.",
)
@click.option(
    "--base-url",
    "base_urls",
    multiple=True,
    help="Endpoint(s) to check (http://host:port/v1); default: the recipe's generate.base_urls.",
)
@folder_option(
    "--tokenizer",
    None,
    "Local directory of the target's tokenizer; default: target.path (the toy's when the recipe builds one).",
    required=False,
)
@click.option(
    "--model", default=None, help="Served model name; default: the recipe's, else the first one the endpoint lists."
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Completion limit of each request; default: the recipe's generate.max_tokens, the room its run gives the "
    "reasoning to finish (so the </think> boundary and the end-of-turn are checked).",
)
def command(
    recipe: str, base_urls: tuple[str, ...], tokenizer: str | None, model: str | None, max_tokens: int | None
) -> None:
    """Send the pre-flight suite (a question, a system prompt, a two-turn history, a tool round trip) to each
    endpoint; check per case that the server's token ids equal the reconstruction of its own text."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.errors import ConfigError
    from eagle3_core.preflight.suite import preflight

    config = PipelineConfig.from_yaml(recipe)
    urls = list(base_urls) or config.generate.base_urls
    if not urls:  # before the toy build below, which trains for minutes when not cached
        raise ConfigError("no endpoint to check", fix="pass --base-url http://host:port/v1")
    target = config.target
    if tokenizer is None and target.path is None and config.toy is not None:
        from eagle3_core.toy.build import build_toy_target

        tokenizer = str(build_toy_target(config.toy))
    if tokenizer is not None:
        target = target.model_copy(update={"path": tokenizer})
    gen = config.generate.model_copy(update={"model": model or config.generate.model})
    for url in urls:
        click.echo(preflight(target, gen, url, max_tokens, strict=True).line())
