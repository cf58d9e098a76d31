"""Nightly dataset versions with real Parquet shards: what is reused, what is kept, what is pruned."""

import datetime as dt
import os

import polars as pl

from eagle3_core.contracts import generations
from eagle3_core.nightly import versions as dv
from eagle3_core.stages.generate.shards import RowShardWriter, read_persisted


def accepted_row(sample_id):
    return generations.accepted_row(
        sample_id=sample_id,
        messages=[{"role": "user", "content": sample_id}],
        reasoning="r",
        content="c",
        reasoning_source="reasoning",
        finish_reason="stop",
        model="m",
        endpoint="e",
        prompt_token_ids=[1],
        completion_token_ids=[2],
        prompt_tokens=1,
        completion_tokens=1,
        attempts=1,
        latency_s=0.1,
        created_at=0.0,
    )


def write_version(root, name, shards, rejected=(), complete=True):
    """A version whose generations hold one accepted shard per list of ids (written by generate's writer)."""
    gen = dv.versions_dir(root) / name / "generations"
    writer = RowShardWriter(gen / "accepted", "accepted", shard_rows=10_000, flush_seconds=1e9)
    for ids in shards:
        for sid in ids:
            writer.add(accepted_row(sid))
        writer.flush()
    rejects = RowShardWriter(gen / "rejected", "rejected", shard_rows=10_000, flush_seconds=1e9)
    for sid in rejected:
        rejects.add(generations.rejected_row(sid, 0, "{}", "empty_reasoning", ""))
    rejects.flush()
    if complete:
        dv.mark_complete(gen.parent, {"version": name})
    return gen


def test_unchanged_shards_are_hard_linked_and_changed_ones_keep_only_current_rows(tmp_path):
    old = write_version(tmp_path, "2026-11-01", [["a", "b"], ["c", "gone"], ["gone2"]], rejected=["r"])
    new = dv.versions_dir(tmp_path) / "2026-11-02" / "generations"

    reuse = dv.seed_from(old, new, current_ids={"a", "b", "c", "r", "new"})

    assert (reuse.linked, reuse.filtered, reuse.dropped, reuse.rows) == (2, 1, 1, 4)
    first = new / "accepted" / "part-00000.parquet"
    assert os.path.samefile(first, old / "accepted" / "part-00000.parquet")
    assert pl.read_parquet(new / "accepted" / "part-00001.parquet")["sample_id"].to_list() == ["c"]
    assert not (new / "accepted" / "part-00002.parquet").exists()


def test_generate_resume_sees_carried_rows_as_done_so_only_new_prompts_are_sent(tmp_path):
    old = write_version(tmp_path, "2026-11-01", [["a", "b"]], rejected=["r"])
    new = dv.versions_dir(tmp_path) / "2026-11-02" / "generations"
    dv.seed_from(old, new, current_ids={"a", "r", "new"})

    done, _, _ = read_persisted(new)

    assert (done.outcome("a"), done.outcome("r"), done.outcome("b"), len(done)) == ("accepted", "rejected", None, 2)


def test_a_changed_model_carries_nothing_over(tmp_path):
    old = write_version(tmp_path, "2026-11-01", [["a", "b"]])
    new = dv.versions_dir(tmp_path) / "2026-11-02" / "generations"

    reuse = dv.seed_from(old, new, current_ids={"a-under-new-model", "b-under-new-model"})

    assert (reuse.linked, reuse.filtered, reuse.rows) == (0, 0, 0)
    assert list((new / "accepted").glob("*.parquet")) == []


def test_pruning_deleting_an_old_version_leaves_the_shards_a_new_version_links_to(tmp_path):
    old = write_version(tmp_path, "2026-11-01", [["a"]])
    new = dv.versions_dir(tmp_path) / "2026-11-02" / "generations"
    dv.seed_from(old, new, current_ids={"a"})
    dv.mark_complete(new.parent, {"version": "2026-11-02"})

    assert dv.prune(tmp_path, keep=1) == ["2026-11-01"]

    assert pl.read_parquet(new / "accepted" / "part-00000.parquet")["sample_id"].to_list() == ["a"]


def test_prune_keeps_the_newest_n_and_every_version_a_drafter_was_trained_on(tmp_path):
    for day in range(1, 6):
        write_version(tmp_path, f"2026-11-0{day}", [["x"]])
    drafter = dv.drafters_dir(tmp_path) / "2026-11-01"
    drafter.mkdir(parents=True)
    dv.mark_trained_on(drafter, "2026-11-01")

    deleted = dv.prune(tmp_path, keep=2)

    assert deleted == ["2026-11-02", "2026-11-03"]
    assert dv.complete_versions(tmp_path) == ["2026-11-01", "2026-11-04", "2026-11-05"]


def test_prune_never_deletes_a_version_still_being_written(tmp_path):
    write_version(tmp_path, "2026-11-01", [["x"]], complete=False)
    write_version(tmp_path, "2026-11-02", [["x"]])

    assert dv.prune(tmp_path, keep=1) == []
    assert (dv.versions_dir(tmp_path) / "2026-11-01").is_dir()


def test_a_second_version_on_one_day_gets_a_suffix_and_a_crashed_one_is_resumed(tmp_path):
    today = dt.date(2026, 11, 30)
    assert dv.new_version_name(tmp_path, today) == "2026-11-30"
    write_version(tmp_path, "2026-11-30", [["x"]], complete=False)
    assert dv.new_version_name(tmp_path, today) == "2026-11-30"
    dv.mark_complete(dv.versions_dir(tmp_path) / "2026-11-30", {})
    assert dv.new_version_name(tmp_path, today) == "2026-11-30.02"


def test_seeding_a_resumed_version_does_not_link_twice(tmp_path):
    old = write_version(tmp_path, "2026-11-01", [["a"]])
    new = dv.versions_dir(tmp_path) / "2026-11-02" / "generations"
    dv.seed_from(old, new, current_ids={"a"})

    again = dv.seed_from(old, new, current_ids={"a"})

    assert again.linked == 0
    assert len(list((new / "accepted").glob("*.parquet"))) == 1


def test_the_latest_drafter_is_the_newest_trained_one(tmp_path):
    assert dv.latest_drafter(tmp_path) is None
    for name in ("2026-11-01", "2026-11-03"):
        (dv.drafters_dir(tmp_path) / name).mkdir(parents=True)
        dv.mark_trained_on(dv.drafters_dir(tmp_path) / name, name)
    assert dv.latest_drafter(tmp_path).name == "2026-11-03"
