"""Prompt sources: local files and directories, streamed; counted for the bar; fingerprinted."""

import json

import polars as pl
import pytest

from eagle3_core.errors import InputError
from eagle3_core.prompts.inputs import count_rows, fingerprint, iter_rows
from eagle3_core.prompts.source import PromptSource
from tests.stages.generate.helpers import prompts, write_jsonl


def test_a_json_array_a_jsonl_file_and_a_parquet_file_read_the_same_rows(tmp_path):
    rows = prompts(4)
    (tmp_path / "a.json").write_text(json.dumps(rows))
    write_jsonl(tmp_path / "b.jsonl", rows)
    pl.DataFrame(rows).write_parquet(tmp_path / "c.parquet")
    for name in ("a.json", "b.jsonl", "c.parquet"):
        assert list(iter_rows(PromptSource(input=str(tmp_path / name)))) == rows


def test_max_samples_caps_rows_and_the_count(tmp_path):
    src = PromptSource(input=str(write_jsonl(tmp_path / "in.jsonl", prompts(10))), max_samples=3)
    assert [r["prompt"] for r in iter_rows(src)] == ["Q0", "Q1", "Q2"]
    assert count_rows(src) == 3


def test_rows_are_read_lazily(tmp_path):
    # a file with a broken tail still yields its head: rows are read as they are asked for
    path = write_jsonl(tmp_path / "in.jsonl", prompts(3))
    rows = iter_rows(PromptSource(input=str(path)))
    assert next(rows) == {"prompt": "Q0"}
    assert not isinstance(rows, list)


def test_the_fingerprint_changes_when_the_file_does(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", prompts(3))
    before = fingerprint(PromptSource(input=str(path)))
    write_jsonl(path, prompts(4))
    assert fingerprint(PromptSource(input=str(path))) != before


def test_an_unsupported_file_or_an_empty_directory_is_an_input_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match="unsupported input file type"):
        list(iter_rows(PromptSource(input=str(tmp_path / "notes.txt"))))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .jsonl/.json/.parquet files"):
        list(iter_rows(PromptSource(input=str(tmp_path / "empty"))))
