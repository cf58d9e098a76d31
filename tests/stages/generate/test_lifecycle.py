"""generate goes through the one driver (GenerateStage): an error leaves `failed`, an interrupt `running`
(resumable, as a kill would), and the rerun finishes the job without a duplicate."""

import pytest

from eagle3_core.run.manifest import read_manifest
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import Interrupting, accepted, config, prompts, write_jsonl


def test_an_interrupt_leaves_the_manifest_running_and_the_rerun_resumes(tmp_path, fake_server):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(60)), tmp_path / "out"
    cfg = config(src, [fake_server.url], shard_rows=5)

    with pytest.raises(KeyboardInterrupt):
        run_generate(cfg, out, Interrupting(after=20))

    first = read_manifest(out)
    assert first.status == "running", first.details.get("error")  # not failed: only the user stopped it
    kept = len(accepted(out))
    assert 0 < kept < 60

    manifest = run_generate(cfg, out)  # the folder's lock was let go
    assert manifest.status == "complete" and manifest.counts["accepted"] == 60
    assert manifest.counts["resumed"] >= kept and accepted(out)["sample_id"].n_unique() == 60 == len(accepted(out))


def test_an_error_leaves_the_manifest_failed_with_the_error(tmp_path, fake_server):
    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(10)), tmp_path / "out"
    fake_server.inject("503", times=None, match="Q1")
    with pytest.raises(Exception, match="still open"):
        run_generate(config(src, [fake_server.url], max_retries=0), out)
    manifest = read_manifest(out)
    assert manifest.status == "failed" and manifest.details["error"].startswith("StageError: 1 prompt is still open")


def test_a_folder_written_under_another_stage_key_asks_nothing_again(tmp_path, fake_server):
    """A stage key changed on purpose (``Stage.key_version``, run.keys) reruns generate, and the rerun finds every
    answer on disk by its row's own sample key: an upgrade that changes the key re-requests no prompt."""
    from eagle3_core.run.manifest import write_manifest

    src, out = write_jsonl(tmp_path / "in.jsonl", prompts(12)), tmp_path / "out"
    cfg = config(src, [fake_server.url], shard_rows=5)
    first = run_generate(cfg, out)
    sent = len(fake_server.requests)
    write_manifest(out, first.model_copy(update={"config_hash": "0" * 16}))  # as an earlier key version wrote it

    again = run_generate(cfg, out)

    asked = {m["content"] for r in fake_server.requests[sent:] for m in r.get("messages", [])}
    assert again.config_hash == first.config_hash  # it ran (a skip would have kept the other key) and asked the probe
    assert not asked & {p["prompt"] for p in prompts(12)} and again.counts["accepted"] == 12 == len(accepted(out))
