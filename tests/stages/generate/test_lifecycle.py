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
