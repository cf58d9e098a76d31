"""`eagle3 evaluate`: drafter/export/ + target + held-out prompts -> eval/ (runs the evaluate flow)."""

from __future__ import annotations

from pathlib import Path

import click

from eagle3_core.contracts.details import EvaluateDetails
from eagle3_core.prompts.source import PromptSource
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.target.config import TargetConfig
from flows.cli.options import field_option, folder_option, run_stage, target_options


@click.command("evaluate")
@folder_option("--target", None, "Local directory of the target model.")
@folder_option("--drafter", "export_dir", "The drafter's export folder (drafter/export, from `eagle3 train`).")
@click.option(
    "--input",
    "prompts",
    default=None,
    help="Held-out prompts (.jsonl/.parquet or a HF dataset); default: the toy target's prompts_heldout.jsonl.",
)
@folder_option("--out", "out_dir", "eval/ folder to write.")
@folder_option(
    "--generations",
    "generations_dir",
    "generations/ the drafter was trained on: refuse held-out prompts found there.",
    required=False,
)
@field_option(EvaluateConfig, "num_speculative_tokens", "-k", "--num-speculative-tokens", "k")
@field_option(EvaluateConfig, "temperature")
@field_option(EvaluateConfig, "max_tokens")
@field_option(PromptSource, "max_samples", help="Use at most this many held-out prompts.")
@field_option(EvaluateConfig, "concurrency")
@click.option("--offline-only", is_flag=True, help="Skip vLLM: only the transformers loop.")
@click.option("--online-only", is_flag=True, help="Skip the transformers loop.")
@click.option("--no-baseline", is_flag=True, help="Do not serve the target without the drafter (no speed-up figure).")
@field_option(PromptSource, "split")
@field_option(EvaluateConfig, "threads")
@field_option(ServeConfig, "python", "--vllm-python", "vllm_python")
@target_options(TargetConfig)
@click.option(
    "--reasoning-parser",
    default=None,
    help="vLLM --reasoning-parser for the target ('none' for none); default: the recipe's "
    "(--family/--recipe), none without one.",
)
def command(
    target: str,
    export_dir: str,
    out_dir: str,
    generations_dir: str | None,
    vllm_python: str | None,
    family: str | None,
    recipe: str | None,
    trust_remote_code: bool,
    reasoning_parser: str | None,
    **given,
) -> None:
    """Measure the drafter's acceptance length in real vLLM and offline."""
    from eagle3_core.stages.reconstruct.recipes import target_from_recipe

    parser = (
        {}
        if reasoning_parser is None
        else {"reasoning_parser": None if reasoning_parser == "none" else reasoning_parser}
    )
    target_cfg = target_from_recipe(recipe, family, path=target, trust_remote_code=trust_remote_code, **parser)
    manifest = run_stage(
        "evaluate",
        cfg=evaluate_config(target, **given),
        target=target_cfg,
        export_dir=export_dir,
        out_dir=out_dir,
        serve=ServeConfig(python=vllm_python),
        generations_dir=generations_dir,
    )
    d = EvaluateDetails.of(manifest)
    click.echo(
        f"acceptance length (k={d.k}, temperature {d.temperature}, bonus token included): "
        f"vLLM {_fmt(d.online_acceptance_length) if not d.vllm_refused else 'refused here: ' + d.vllm_refused}, "
        f"offline {_fmt(d.offline_acceptance_length)}, "
        f"simulated {_fmt(d.simulated_acceptance_length)}; speed-up {_fmt(d.speedup)}x"
        f"{' (' + d.speedup_error + ')' if d.speedup_error else ''}"
        + "".join(f"; thinking {mode} {_fmt(v)}" for mode, v in (d.acceptance_by_thinking or {}).items())
        + f" -> {out_dir}/report.md"
    )
    if d.lossless:
        click.echo(d.lossless)


def evaluate_config(
    target: str,
    prompts: str | None,
    split: str,
    max_samples: int | None,
    k: int,
    offline_only: bool,
    online_only: bool,
    no_baseline: bool,
    **fields,
) -> EvaluateConfig:
    """The options as an EvaluateConfig: prompts default to the toy's held-out ones beside the target."""
    from eagle3_core.stages.evaluate.stage import TOY_HELDOUT

    if offline_only and online_only:
        raise click.UsageError("--offline-only and --online-only exclude each other")
    if prompts is None and (Path(target) / TOY_HELDOUT).exists():
        prompts = str(Path(target) / TOY_HELDOUT)
    return EvaluateConfig(
        **fields,
        prompts=PromptSource(input=prompts, split=split, max_samples=max_samples) if prompts else None,
        num_speculative_tokens=k,
        online=not offline_only,
        offline=not online_only,
        baseline=not no_baseline,
        offline_max_prompts=max_samples or 32,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
