"""run_reconstruct end to end on Parquet shards: server-id check, limits, rejects, errors, resume."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from eagle3_core.errors import ConfigError, InputError, StageError
from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import TargetConfig
from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer
from tests.stages.reconstruct.records import record, write_generations

USER = [{"role": "user", "content": "What is 2 + 2?"}]


def kimi(family_dirs, **overrides) -> TargetConfig:
    return TargetConfig(path=str(family_dirs["kimi_k2_5"]), **{**FAMILIES["kimi_k2_5"].target, **overrides})


def rows(out_dir) -> list[dict]:
    return [r for f in sorted(out_dir.glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]


def rebuilt_ids(family_dirs, tmp_path, rec) -> tuple[list[int], int]:
    """The text reconstruction of ``rec`` and its prompt length (server ids stripped)."""
    gen = write_generations(tmp_path / "probe-gen", [rec])
    run_reconstruct(ReconstructConfig(prefer="text"), kimi(family_dirs), gen, tmp_path / "probe-seq")
    row = rows(tmp_path / "probe-seq")[0]
    return row["input_ids"], row["loss_mask"].index(1)


def test_server_ids_that_agree_are_counted_as_matches_and_trained_on(family_dirs, tmp_path):
    ids, prompt_len = rebuilt_ids(family_dirs, tmp_path, record("a", USER, "Two and two.", " 4."))
    # K2.5: <think> closes the prompt, so the server's prompt ids end with it.
    rec = record(
        "a",
        USER,
        "Two and two.",
        " 4.",
        prompt_token_ids=ids[: prompt_len + 1],
        completion_token_ids=ids[prompt_len + 1 :],
    )
    out = tmp_path / "seq"
    manifest = run_reconstruct(ReconstructConfig(), kimi(family_dirs), write_generations(tmp_path / "gen", [rec]), out)
    assert manifest.details["server_check"] == {"checked": 1, "matched": 1, "match_rate": 1.0}
    assert rows(out)[0]["source"] == "server" and rows(out)[0]["input_ids"] == ids


def test_a_mismatch_reports_its_first_differing_position_and_server_ids_win_by_default(family_dirs, tmp_path):
    ids, prompt_len = rebuilt_ids(family_dirs, tmp_path, record("a", USER, "Two and two.", " 4."))
    server = list(ids)
    server[prompt_len + 3] = 42  # the server sampled another token there
    rec = record(
        "a",
        USER,
        "Two and two.",
        " 4.",
        prompt_token_ids=server[: prompt_len + 1],
        completion_token_ids=server[prompt_len + 1 :],
    )
    gen = write_generations(tmp_path / "gen", [rec])
    manifest = run_reconstruct(ReconstructConfig(), kimi(family_dirs), gen, tmp_path / "seq")
    assert manifest.details["server_check"]["match_rate"] == 0.0
    assert manifest.details["server_check"]["warning"].startswith("reconstruct: warning: only 0.00% of 1 rebuilt")
    [mismatch] = manifest.details["mismatches"]
    assert (mismatch["sample_id"], mismatch["first_diff"], mismatch["where"]) == ("a", prompt_len + 3, "completion")
    assert rows(tmp_path / "seq")[0]["input_ids"] == server
    run_reconstruct(ReconstructConfig(prefer="text"), kimi(family_dirs), gen, tmp_path / "seq-text")
    assert rows(tmp_path / "seq-text")[0]["input_ids"] == ids and rows(tmp_path / "seq-text")[0]["source"] == "text"


def test_overlong_samples_are_truncated_or_dropped_and_counted(family_dirs, tmp_path):
    gen = write_generations(
        tmp_path / "gen", [record("long", USER, "x " * 200, " done."), record("short", USER, "ok", " 4.")]
    )
    truncated = run_reconstruct(ReconstructConfig(max_length=64), kimi(family_dirs), gen, tmp_path / "t")
    assert truncated.counts["truncated"] == 1 and truncated.counts["sequences"] == 2
    assert max(r["num_tokens"] for r in rows(tmp_path / "t")) == 64
    dropped = run_reconstruct(ReconstructConfig(max_length=64, overlong="drop"), kimi(family_dirs), gen, tmp_path / "d")
    assert dropped.counts["sequences"] == 1 and dropped.details["reject_reasons"] == {"overlong": 1}
    assert [r["sample_id"] for r in rows(tmp_path / "d")] == ["short"]


def test_reasoning_for_a_non_reasoning_target_is_a_counted_reject(family_dirs, tmp_path):
    gen = write_generations(tmp_path / "gen", [record("r", USER, "thinking", " 4."), record("ok", USER, "", " 4.")])
    target = TargetConfig(path=str(family_dirs["llama3"]), **FAMILIES["llama3"].target)
    manifest = run_reconstruct(ReconstructConfig(), target, gen, tmp_path / "seq")
    assert manifest.details["reject_reasons"] == {"reasoning_on_non_reasoning_target": 1}
    stats = json.loads((tmp_path / "seq" / "stats" / "part-00000.json").read_text())
    assert stats["rejects"][0]["sample_id"] == "r"


def test_every_record_rejected_is_an_error_not_an_empty_success(family_dirs, tmp_path):
    gen = write_generations(tmp_path / "gen", [record("r", USER, "thinking", " 4.")])
    target = TargetConfig(path=str(family_dirs["llama3"]), **FAMILIES["llama3"].target)
    with pytest.raises(StageError, match="reasoning_on_non_reasoning_target: 1"):
        run_reconstruct(ReconstructConfig(), target, gen, tmp_path / "seq")
    assert read_manifest(tmp_path / "seq").status == "failed"


def test_a_tokenizer_without_think_tokens_is_refused_before_any_work(family_dirs, tmp_path):
    gen = write_generations(tmp_path / "gen", [record("a", USER, "thinking", " 4.")])
    target = TargetConfig(path=str(family_dirs["llama3"]), end_of_turn="<|eot_id|>")  # think tokens by default
    with pytest.raises(ConfigError, match="no single token for target.think_open '<think>'"):
        run_reconstruct(ReconstructConfig(), target, gen, tmp_path / "seq")


def test_a_configured_id_that_disagrees_with_the_tokenizer_is_refused(family_dirs, tmp_path):
    gen = write_generations(tmp_path / "gen", [record("a", USER, "thinking", " 4.")])
    with pytest.raises(ConfigError, match="think_open_id is 151667 but the tokenizer maps '<think>' to 163606"):
        run_reconstruct(ReconstructConfig(), kimi(family_dirs, think_open_id=151667), gen, tmp_path / "seq")


def test_an_empty_generations_dir_is_a_clear_error(family_dirs, tmp_path):
    (tmp_path / "gen" / "accepted").mkdir(parents=True)
    with pytest.raises(InputError, match="no accepted generation shards"):
        run_reconstruct(ReconstructConfig(), kimi(family_dirs), tmp_path / "gen", tmp_path / "seq")


def test_a_length_cut_turn_has_no_end_of_turn_and_no_think_close(family_dirs, family_tokenizers, tmp_path):
    # Cut inside the reasoning: the ids say so (without them the record is undecidable: test_never_invents).
    out_ids = family_tokenizers["kimi_k2_5"].encode("Two and", add_special_tokens=False)
    gen = write_generations(
        tmp_path / "gen", [record("cut", USER, "Two and", "", finish_reason="length", completion_token_ids=out_ids)]
    )
    run_reconstruct(ReconstructConfig(prefer="text"), kimi(family_dirs), gen, tmp_path / "seq")
    row = rows(tmp_path / "seq")[0]
    supervised = [t for t, m in zip(row["input_ids"], row["loss_mask"]) if m]
    assert family_tokenizers["kimi_k2_5"].decode(supervised) == "<think>Two and"


def test_resume_redoes_only_the_unfinished_shard_and_a_complete_run_is_skipped(family_dirs, tmp_path):
    records = [
        record(f"s{i}", [{"role": "user", "content": f"What is {i} + 1?"}], f"It is {i + 1}.", f" {i + 1}")
        for i in range(10)
    ]
    gen = write_generations(tmp_path / "gen", records, shard_rows=4)
    cfg, out = ReconstructConfig(shard_rows=3), tmp_path / "seq"
    first = run_reconstruct(cfg, kimi(family_dirs), gen, out)
    assert first.counts["sequences"] == 10 and first.details["shards"] == 4
    kept = (out / "part-00000.parquet").stat().st_mtime_ns
    (out / "stats" / "part-00002.json").unlink()  # as if killed while writing shard 2
    manifest = read_manifest(out)
    manifest.status = "running"
    from eagle3_core.run.manifest import write_manifest

    write_manifest(out, manifest)
    again = run_reconstruct(cfg, kimi(family_dirs), gen, out)
    assert again.counts == first.counts
    assert (out / "part-00000.parquet").stat().st_mtime_ns == kept
    assert [r["sample_id"] for r in rows(out)] == [f"s{i}" for i in range(10)]
    assert run_reconstruct(cfg, kimi(family_dirs), gen, out).updated_at == again.updated_at


@pytest.mark.slow  # spawns two processes that each import transformers (~20 s on 2 shared cores)
def test_two_workers_write_the_same_sequences_as_one(family_dirs, tmp_path):
    records = [record(f"s{i}", USER, f"Step {i}.", f" {i}") for i in range(12)]
    gen = write_generations(tmp_path / "gen", records)
    run_reconstruct(ReconstructConfig(shard_rows=4), kimi(family_dirs), gen, tmp_path / "one")
    run_reconstruct(ReconstructConfig(shard_rows=4, workers=2), kimi(family_dirs), gen, tmp_path / "two")
    assert rows(tmp_path / "one") == rows(tmp_path / "two")


def test_sequences_shards_follow_the_contract_types(family_dirs, tmp_path):
    gen = write_generations(tmp_path / "gen", [record("a", USER, "ok", " 4.")])
    run_reconstruct(ReconstructConfig(), kimi(family_dirs), gen, tmp_path / "seq")
    schema = pq.read_schema(tmp_path / "seq" / "part-00000.parquet")
    assert {n: str(schema.field(n).type) for n in schema.names} == {
        "sample_id": "string",
        "input_ids": "list<element: int32>",
        "loss_mask": "list<element: uint8>",
        "num_tokens": "int32",
        "num_supervised": "int32",
        "source": "string",
    }


def test_a_chat_template_that_fails_is_a_counted_reject(tmp_path):
    broken = "{{ raise_exception('no system role') if messages[0].role == 'system' else '' }}<|im_assistant|><think>"
    path = build_family_tokenizer(FAMILIES["kimi_k2_5"], tmp_path / "tok", template=broken)
    gen = write_generations(
        tmp_path / "gen",
        [record("sys", [{"role": "system", "content": "x"}, *USER], "a", " b"), record("ok", USER, "a", " b")],
    )
    target = TargetConfig(path=str(path), **FAMILIES["kimi_k2_5"].target)
    manifest = run_reconstruct(ReconstructConfig(), target, gen, tmp_path / "seq")
    assert manifest.details["reject_reasons"] == {"template_error": 1} and manifest.counts["sequences"] == 1
