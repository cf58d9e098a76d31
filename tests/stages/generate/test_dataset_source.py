"""generate.source: dataset: the rows' own answers into generations/, with the served run's contract."""

from __future__ import annotations

import pytest

from eagle3_core.errors import InputError
from eagle3_core.prompts.source import PromptSource
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.stage import run_generate, stage_keys
from tests.stages.generate.helpers import Recorder, accepted, config, prompts, rejected, write_jsonl


def dataset_config(source, **overrides) -> GenerateConfig:
    fields = {"prompts": PromptSource(input=str(source)), "source": "dataset", "shard_rows": 2}
    return GenerateConfig(**(fields | overrides))


def answered(i: int, **answer) -> dict:
    turn = {"role": "assistant", "content": f" answer {i}\n"} | answer
    return {"messages": [{"role": "user", "content": f"Q{i}"}, turn]}


def test_a_reasoning_content_field_is_the_reasoning_and_both_texts_stay_byte_exact(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [answered(i, reasoning_content=f"\n think {i} ") for i in range(3)])

    manifest = run_generate(dataset_config(src), tmp_path / "out")

    rows = accepted(tmp_path / "out").sort("content")
    assert manifest.counts["accepted"] == 3 and manifest.details["reasoning_sources"] == {"reasoning_content": 3}
    assert rows["reasoning"].to_list() == [f"\n think {i} " for i in range(3)]
    assert rows["content"].to_list() == [f" answer {i}\n" for i in range(3)]
    assert rows["prompt_token_ids"].null_count() == 3 and rows["completion_token_ids"].null_count() == 3
    assert set(rows["endpoint"]) == {"dataset"} and manifest.details["source"] == "dataset"
    assert [m[-1]["role"] for m in rows["messages"].to_list()] == ["user"] * 3  # the answer is not in the prompt


def test_inline_think_tags_of_a_sharegpt_turn_split_into_reasoning_and_answer(tmp_path):
    row = {
        "conversations": [
            {"from": "human", "value": "Q"},
            {"from": "gpt", "value": "<think>step 1</think>\n\nIt is 4."},
        ]
    }
    src = write_jsonl(tmp_path / "in.jsonl", [row])

    manifest = run_generate(dataset_config(src), tmp_path / "out")

    row = accepted(tmp_path / "out").row(0, named=True)
    assert (row["reasoning"], row["content"], row["reasoning_source"]) == ("step 1", "\n\nIt is 4.", "think_tags")
    assert manifest.details["reasoning_sources"] == {"think_tags": 1}


def test_a_row_without_an_assistant_turn_is_a_counted_reject(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [answered(0, reasoning="r"), {"prompt": "Q1"}, answered(2, reasoning="r")])

    manifest = run_generate(dataset_config(src), tmp_path / "out")

    c = manifest.counts
    assert (c["input"], c["accepted"], c["rejected"]) == (3, 2, 1)
    assert manifest.details["reject_reasons"] == {"no_assistant_turn": 1}
    assert rejected(tmp_path / "out")["row_index"].to_list() == [1]


@pytest.mark.parametrize(
    "turn, where",
    [
        ({"content": "<think>A</think>mid<think>B</think>answer"}, "<think> in its answer, beside its first <think>"),
        ({"content": "<think>A<think>B</think>answer"}, "<think> in its reasoning, beside its first <think>"),
        ({"content": "<think>B</think>answer", "reasoning_content": "A"}, "`reasoning_content` field"),
        ({"content": "answer</think>", "reasoning": "A"}, "</think> in its answer, beside its `reasoning` field"),
    ],
)
def test_a_turn_with_a_second_reasoning_block_is_a_counted_reject_never_trained_on(tmp_path, turn, where):
    rows = [
        answered(0, reasoning_content="r"),
        {"messages": [{"role": "user", "content": "Q1"}, {"role": "assistant"} | turn]},
    ]
    src = write_jsonl(tmp_path / "in.jsonl", rows)

    manifest = run_generate(dataset_config(src), tmp_path / "out")

    assert (manifest.counts["accepted"], manifest.counts["rejected"]) == (1, 1)
    assert manifest.details["reject_reasons"] == {"two_reasoning_blocks": 1}
    reject = rejected(tmp_path / "out").row(0, named=True)
    assert reject["row_index"] == 1 and where in reject["detail"] and "keep one block" in reject["detail"]
    assert "<think>" not in "".join(accepted(tmp_path / "out")["content"])


def test_an_answer_without_reasoning_is_rejected_only_while_reasoning_is_required(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [answered(0), answered(1, reasoning_content="r")])

    strict = run_generate(dataset_config(src), tmp_path / "strict")
    lenient = run_generate(dataset_config(src, require_reasoning=False), tmp_path / "lenient")

    assert strict.details["reject_reasons"] == {"empty_reasoning": 1} and strict.counts["accepted"] == 1
    assert "require_reasoning: false" in rejected(tmp_path / "strict")["detail"][0]
    assert lenient.counts["accepted"] == 2 and lenient.details["reasoning_sources"] == {
        "none": 1,
        "reasoning_content": 1,
    }


def test_an_input_where_no_row_has_an_assistant_turn_is_one_error_naming_the_input_and_the_field(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(4))

    with pytest.raises(InputError) as error:
        run_generate(dataset_config(src), tmp_path / "out")

    assert str(src) in str(error.value) and "final assistant turn" in str(error.value)
    assert "messages[-1].role: assistant" in str(error.value) and "generate.source: server" in error.value.fix
    assert read_manifest(tmp_path / "out") is None and not (tmp_path / "out" / "rejected").exists()


def test_a_dataset_run_and_a_served_run_never_take_each_others_rows(tmp_path, make_fake_server):
    server = make_fake_server()
    rows = [answered(i, reasoning_content="r") for i in range(4)]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out"
    served_cfg = config(src, [server.url], return_token_ids=False)

    served = run_generate(served_cfg, out)
    served_ids = set(accepted(out)["sample_id"])
    taken = run_generate(dataset_config(src), out)
    taken_ids = set(accepted(out)["sample_id"])
    again = run_generate(served_cfg, out)

    assert stage_keys(served_cfg)[0] != stage_keys(dataset_config(src))[0]
    assert served.counts["accepted"] == taken.counts["accepted"] == 4 and taken.counts["resumed"] == 0
    assert taken_ids.isdisjoint(served_ids) and set(accepted(out)["endpoint"]) == {server.url}
    assert again.counts["resumed"] == 0 and again.counts["requests"] == 4  # asked again, none taken from the dataset


def test_a_killed_run_resumes_from_its_durable_shards_and_writes_no_row_twice(tmp_path):
    src, out = write_jsonl(tmp_path / "in.jsonl", [answered(i, reasoning="r") for i in range(7)]), tmp_path / "out"

    class KilledAfterFirstShard(Recorder):
        def progress(self, stage, done, total, **figures):
            if (out / "accepted" / "part-00000.parquet").exists():
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_generate(dataset_config(src), out, KilledAfterFirstShard())
    assert read_manifest(out).status == "running"
    manifest = run_generate(dataset_config(src), out)

    rows = accepted(out)
    assert manifest.status == "complete" and manifest.counts["resumed"] == 2
    assert rows.height == 7 and rows["sample_id"].n_unique() == 7
    assert run_generate(dataset_config(src), out).updated_at == manifest.updated_at  # complete: skipped


def test_the_dataset_source_asks_no_endpoint_so_the_pipeline_serves_nothing_for_it(tmp_path):
    from eagle3_core.config import PipelineConfig
    from eagle3_core.stages import BY_NAME

    served = BY_NAME["generate"].build(PipelineConfig(out=str(tmp_path), generate={"base_urls": ["http://h:1/v1"]}))
    taken = BY_NAME["generate"].build(PipelineConfig(out=str(tmp_path), generate={"source": "dataset"}))

    assert served.endpoint_field == "base_urls" and taken.endpoint_field is None
    assert list(served.endpoints()) == ["http://h:1/v1"] and taken.endpoints() == {}  # no limit for it either
