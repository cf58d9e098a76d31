"""Bad bytes and bad lines in the prompts: each one a counted reject with its line, the rest generated."""

import pytest

from eagle3_core.errors import InputError
from eagle3_core.stages.generate.stage import run_generate
from tests.cli_helpers import cli_error, error_line
from tests.faults import refused_while_held, snapshot, truncate
from tests.stages.generate.helpers import config, prompts, rejected, write_jsonl


def test_a_line_of_bad_bytes_or_the_wrong_type_is_a_reject_with_its_line_and_the_good_rows_go_on(tmp_path, fake_server):
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"prompt": "Q0"}\n'
        b'{"prompt": "caf\xe9"}\n'  # latin-1, not UTF-8
        b"\n"
        b'["a", "list"]\n'
        b'{"prompt": 3}\n'
        b'{"prompt": "Q1"}\n'
    )
    manifest = run_generate(config(src, [fake_server.url]), tmp_path / "out")
    assert (manifest.counts["input"], manifest.counts["accepted"], manifest.counts["rejected"]) == (5, 2, 3)
    assert manifest.details["reject_reasons"] == {"undecodable": 1, "unknown_shape": 1, "non_string_content": 1}
    details = dict(zip(rejected(tmp_path / "out")["reason"], rejected(tmp_path / "out")["detail"]))
    assert details["undecodable"] == "in.jsonl line 2: byte 15 is not UTF-8 (invalid continuation byte)"
    assert details["unknown_shape"] == "in.jsonl line 4: a row must be a JSON object, got list"
    assert details["non_string_content"] == "in.jsonl line 5: `prompt` must be a string, got int"
    assert sorted(p for p in fake_server.prompts() if p.startswith("Q")) == ["Q0", "Q1"]  # besides the probe


def test_a_lone_surrogate_escape_is_a_reject_with_its_line_and_the_good_rows_go_on(tmp_path, fake_server):
    src = tmp_path / "in.jsonl"  # valid JSON, but half an emoji: no UTF-8 text can hold it
    src.write_text('{"prompt": "Q0"}\n{"prompt": "half \\ud83d an emoji"}\n{"prompt": "Q1"}\n')
    manifest = run_generate(config(src, [fake_server.url]), tmp_path / "out")
    assert (manifest.counts["accepted"], manifest.counts["rejected"]) == (2, 1)
    row = rejected(tmp_path / "out").row(0, named=True)
    assert row["reason"] == "undecodable" and row["row_index"] == 1
    assert row["detail"].startswith("in.jsonl line 2: ") and "\\ud83d" in row["detail"]
    assert row["input"] == '{"prompt": "half \\ud83d an emoji"}'  # kept as the escape it was


def test_a_leading_byte_order_mark_is_not_part_of_the_first_row(tmp_path, fake_server):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'\xef\xbb\xbf{"prompt": "Q0"}\n')
    assert run_generate(config(src, [fake_server.url]), tmp_path / "out").counts["accepted"] == 1


def test_a_byte_order_mark_before_a_blank_first_line_or_a_json_array_is_not_content(tmp_path, fake_server):
    src = tmp_path / "in.jsonl"  # what an editor saving "UTF-8 with BOM" writes for a blank first line
    src.write_bytes(b'\xef\xbb\xbf\n{"prompt": "Q0"}\n')
    counts = run_generate(config(src, [fake_server.url]), tmp_path / "out").counts
    assert (counts["input"], counts["accepted"], counts["rejected"]) == (1, 1, 0)
    src.write_bytes(b"\xef\xbb\xbf\r\n")
    with pytest.raises(InputError, match="the input holds no rows"):
        run_generate(config(src, [fake_server.url]), tmp_path / "empty")
    array = tmp_path / "in.json"  # a .json array saved the same way is read, not refused as "not valid JSON"
    array.write_bytes(b'\xef\xbb\xbf[{"prompt": "Q1"}]')
    assert run_generate(config(array, [fake_server.url]), tmp_path / "array").counts["accepted"] == 1


def test_an_input_with_no_rows_is_an_error_unless_allowed(tmp_path, fake_server):
    src = tmp_path / "in.jsonl"
    src.write_text("\n\n")
    with pytest.raises(InputError, match="the input holds no rows") as err:
        run_generate(config(src, [fake_server.url]), tmp_path / "out")
    assert "--allow-empty" in err.value.fix and snapshot(tmp_path / "out") == {}
    manifest = run_generate(config(src, [fake_server.url], allow_empty=True), tmp_path / "out")
    assert manifest.status == "complete" and manifest.counts["input"] == 0


def test_the_cli_refuses_an_empty_input_in_one_line(prefect_api, tmp_path, fake_server, capsys):
    (tmp_path / "in.jsonl").write_text("")
    err = cli_error(generate_argv(tmp_path / "in.jsonl", fake_server.url, tmp_path / "out"), capsys)
    assert error_line(err).startswith("error: the input holds no rows")


def test_a_concurrent_run_into_the_same_folder_refuses_and_changes_nothing(prefect_api, tmp_path, fake_server, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", prompts(3))
    run_generate(config(src, [fake_server.url]), tmp_path / "out")
    out = tmp_path / "out"
    refused_while_held(out, lambda: cli_error(generate_argv(src, fake_server.url, out), capsys))


def test_a_truncated_part_of_its_own_folder_is_named_on_resume_and_no_part_changes(tmp_path, fake_server):
    import json

    src = write_jsonl(tmp_path / "in.jsonl", prompts(25))
    run_generate(config(src, [fake_server.url]), tmp_path / "out")  # 10 rows a part: 3 parts
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    (tmp_path / "out" / "manifest.json").write_text(
        json.dumps({**manifest, "status": "running"})
    )  # as a kill leaves it
    truncate(tmp_path / "out" / "accepted" / "part-00001.parquet")
    parts = {k: v for k, v in snapshot(tmp_path / "out").items() if "part-" in k}
    with pytest.raises(
        InputError, match="damaged generate shard part-00001.parquet: not a readable Parquet file"
    ) as err:
        run_generate(config(src, [fake_server.url]), tmp_path / "out")
    assert err.value.fix == "delete it and rerun `eagle3 generate`: the stage redoes that shard"
    assert {k: v for k, v in snapshot(tmp_path / "out").items() if "part-" in k} == parts


def test_a_torn_parquet_prompts_file_is_one_error_naming_it(tmp_path):
    import polars as pl

    from eagle3_core.prompts.inputs import count_rows, iter_rows
    from eagle3_core.prompts.source import PromptSource

    pl.DataFrame(prompts(5)).write_parquet(tmp_path / "a.parquet")
    pl.DataFrame(prompts(5, "R")).write_parquet(tmp_path / "b.parquet")
    truncate(tmp_path / "b.parquet")
    source = PromptSource(input=str(tmp_path))
    for read in (count_rows, lambda s: list(iter_rows(s))):
        with pytest.raises(InputError, match="cannot read Parquet file: Parquet magic bytes not found") as err:
            read(source)
        assert err.value.path == str(tmp_path / "b.parquet")


def generate_argv(src, url: str, out) -> list[str]:
    return ["generate", "--input", str(src), "--base-url", url, "--out", str(out), "--no-progress"]
