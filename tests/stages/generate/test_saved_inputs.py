"""Inputs as they sit on disk in the wild: a `save_to_disk` folder is a dataset, its metadata files
are not prompts, and rows of no known shape are one error before any request."""

import polars as pl
import pytest

from eagle3_core.errors import InputError
from eagle3_core.prompts.inputs import count_rows, fingerprint, iter_rows
from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import config, prompts, write_jsonl


def saved_dataset(path, rows):
    import datasets

    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return path


def test_a_saved_dataset_folder_is_read_through_load_from_disk_and_its_metadata_is_no_row(tmp_path):
    folder = saved_dataset(tmp_path / "saved", prompts(5))
    assert {p.name for p in folder.iterdir()} >= {"state.json", "dataset_info.json"}  # what misled the reader

    source = PromptSource(input=str(folder))
    assert list(iter_rows(source)) == prompts(5) and count_rows(source) == 5
    before = fingerprint(source)  # its files' bytes identify it, its metadata among them
    state = folder / "state.json"
    state.write_text(state.read_text().replace("{", '{"_edited": 1, ', 1))
    assert fingerprint(source) != before


def test_a_saved_dataset_dict_is_read_by_split_and_a_missing_split_is_named(tmp_path):
    import datasets

    folder = tmp_path / "dict"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(prompts(3)), "test": datasets.Dataset.from_list(prompts(2, "T"))}
    ).save_to_disk(str(folder))

    assert list(iter_rows(PromptSource(input=str(folder), split="test"))) == prompts(2, "T")
    assert count_rows(PromptSource(input=str(folder))) == 3
    with pytest.raises(InputError, match="no split 'validation' \\(it has: train, test\\)"):
        list(iter_rows(PromptSource(input=str(folder), split="validation")))


def test_metadata_files_beside_prompt_files_are_not_read_as_rows(tmp_path):
    write_jsonl(tmp_path / "prompts.jsonl", prompts(2))
    (tmp_path / "dataset_info.json").write_text('{"description": "not a prompt"}')
    assert list(iter_rows(PromptSource(input=str(tmp_path)))) == prompts(2)


def test_a_saved_dataset_is_generated_end_to_end(tmp_path, fake_server):
    folder = saved_dataset(tmp_path / "saved", prompts(6))
    manifest = run_generate(config(folder, [fake_server.url]), tmp_path / "out")
    assert manifest.status == "complete" and manifest.counts["accepted"] == 6 and manifest.counts["input"] == 6


@pytest.mark.parametrize("kind", ["parquet", "saved"])
def test_rows_of_no_known_shape_are_one_error_naming_the_columns_before_any_request(tmp_path, fake_server, kind):
    rows = [{"question": f"q{i}", "answer": "a"} for i in range(10)]
    if kind == "parquet":
        src = tmp_path / "qa.parquet"
        pl.DataFrame(rows).write_parquet(src)
    else:
        src = saved_dataset(tmp_path / "qa", rows)

    with pytest.raises(InputError, match="the first 10 rows have the columns answer, question; wanted `messages`"):
        run_generate(config(src, [fake_server.url]), tmp_path / "out")

    assert fake_server.requests == []  # not even the probe


def test_a_few_odd_rows_among_good_ones_stay_per_row_rejects(tmp_path, fake_server):
    rows = [{"question": "odd"}] + prompts(3)
    manifest = run_generate(config(write_jsonl(tmp_path / "in.jsonl", rows), [fake_server.url]), tmp_path / "out")
    assert manifest.details["reject_reasons"] == {"unknown_shape": 1} and manifest.counts["accepted"] == 3
