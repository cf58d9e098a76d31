"""A recipe with generate.source: dataset runs the pipeline with no serve: and no endpoint.

The toy recipe (configs/toy.yaml) on 20 of the toy's dataset answers, through the real pipeline
flow (ephemeral Prefect API), real Parquet and the toy's real tokenizer: generate takes the rows'
own answers, reconstruct rebuilds them on the text path and says so in its counts.
"""

from pathlib import Path

from eagle3_core.config import PipelineConfig
from eagle3_core.prompts.source import PromptSource
from eagle3_core.run.manifest import read_manifest
from flows.pipeline import pipeline

TOY_RECIPE = Path(__file__).resolve().parents[2] / "configs" / "toy.yaml"


def dataset_recipe(out: Path, answers: str, require_reasoning: bool) -> PipelineConfig:
    config = PipelineConfig.from_yaml(TOY_RECIPE)
    generate = config.generate.model_copy(
        update={
            "source": "dataset",
            "prompts": PromptSource(input=f"{{toy}}/{answers}", max_samples=20),
            "require_reasoning": require_reasoning,
            "base_urls": [],
        }
    )
    return config.model_copy(
        update={"out": str(out), "serve": None, "stages": ["generate", "reconstruct"], "generate": generate}
    )


def test_a_dataset_recipe_runs_without_serve_or_endpoint_and_reconstruct_takes_the_text_path(
    prefect_api, toy_target, tmp_path
):
    outcomes = pipeline(dataset_recipe(tmp_path / "run", "dataset_answers_reasoned.jsonl", True))

    assert "serve" not in outcomes  # no vLLM was started
    assert outcomes["generate"]["status"] == "ran" and outcomes["generate"]["counts"]["accepted"] == 20
    sequences = read_manifest(tmp_path / "run" / "sequences")
    assert sequences.status == "complete"
    assert sequences.counts["source_text"] == 20 and not sequences.counts.get("source_server")


def test_answers_without_reasoning_reconstruct_with_an_empty_think_block(prefect_api, toy_target, tmp_path):
    import polars as pl
    from transformers import AutoTokenizer

    outcomes = pipeline(dataset_recipe(tmp_path / "run", "dataset_answers.jsonl", False))

    assert outcomes["reconstruct"]["counts"]["source_text"] == 20
    row = pl.read_parquet(next((tmp_path / "run" / "sequences").glob("part-*.parquet"))).row(0, named=True)
    text = AutoTokenizer.from_pretrained(str(toy_target)).decode(row["input_ids"])
    assert text.endswith("<think></think>" + _answer_of(tmp_path, row["sample_id"]) + "<|im_end|>")


def _answer_of(tmp_path: Path, sample_id: str) -> str:
    import polars as pl

    generations = pl.concat(
        [pl.read_parquet(f) for f in (tmp_path / "run" / "generations" / "accepted").glob("part-*.parquet")]
    )
    return generations.filter(pl.col("sample_id") == sample_id)["content"][0]


def test_the_generate_command_takes_a_datasets_answers_without_any_endpoint(prefect_api, tmp_path):
    from tests.stages.generate.helpers import write_jsonl
    from tests.stages.generate.test_cli import EAGLE3, run_cli

    rows = [{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning": "R"}]}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"prompt": "Q"}])

    done = run_cli([EAGLE3, "generate", "--source", "dataset", "--input", str(src), "--out", str(tmp_path / "out")])
    refused = run_cli([EAGLE3, "generate", "--source", "dataset", "--input", str(bare), "--out", str(tmp_path / "b")])

    assert done.returncode == 0, done.stderr
    assert "generate: 1 accepted, 0 rejected, 0 skipped of 1 rows" in done.stdout
    assert refused.returncode == 2 and "no row of" in refused.stderr and "final assistant turn" in refused.stderr
