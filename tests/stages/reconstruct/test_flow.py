"""reconstruct_flow and vocab_flow against a real (temporary) Prefect API, and the two commands."""

from __future__ import annotations

import json

from click.testing import CliRunner

from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import cli_error
from tests.prefect_reads import artifacts
from tests.stages.reconstruct.families import FAMILIES
from tests.stages.reconstruct.records import record, write_generations

USER = [{"role": "user", "content": "What is 2 + 2?"}]


def server_check_artifact(key: str = "reconstruct-server-check"):
    """The artifacts under ``key``, newest first: the session's Prefect API holds every earlier
    test's too (the pipeline tests publish the same keys)."""
    return artifacts(key)


def test_reconstruct_flow_writes_sequences_and_publishes_the_server_check(prefect_api, family_dirs, tmp_path):
    from eagle3_core.stages.vocab.config import VocabConfig
    from flows.stages import stage_flow

    reconstruct_flow = stage_flow("reconstruct")
    from flows.stages import stage_flow

    target = TargetConfig(path=str(family_dirs["qwen3"]), **FAMILIES["qwen3"].target)
    gen = write_generations(
        tmp_path / "gen", [record("a", USER, "\nTwo and two.\n", "\n\n4."), record("b", USER, "", "")]
    )
    manifest = reconstruct_flow(
        cfg=ReconstructConfig(), target=target, generations_dir=str(gen), out_dir=str(tmp_path / "seq")
    )
    assert manifest.status == "complete" and manifest.counts["sequences"] == 1
    assert manifest.details["reject_reasons"] == {"empty_completion": 1}
    artifacts = server_check_artifact()
    assert artifacts and "match rate" in artifacts[0].description
    rejects = server_check_artifact("reconstruct-rejects")
    data = json.loads(rejects[0].data) if isinstance(rejects[0].data, str) else rejects[0].data
    assert {"group": "reject_reasons", "name": "empty_completion", "value": 1} in data
    vocab = stage_flow("vocab")(
        cfg=VocabConfig(draft_vocab_size=8),
        target=target,
        sequences_dir=str(tmp_path / "seq"),
        out_dir=str(tmp_path / "vocab"),
    )
    assert vocab.details["draft_vocab_size"] == 8 and vocab.details["target_vocab_size"] == 151936


def test_the_commands_run_the_flows_and_print_what_they_did(prefect_api, family_dirs, tmp_path):
    from flows.cli import cli

    # Qwen3: its parser keeps the reasoning's whitespace, so the text path decides this record
    # (Kimi's kimi_k2 strips it, and a Kimi record without ids is a counted reject).
    gen = write_generations(tmp_path / "gen", [record("a", USER, "Two and two.", " 4.")])
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "reconstruct",
            "--input",
            str(gen),
            "--tokenizer",
            str(family_dirs["qwen3"]),
            "--out",
            str(tmp_path / "seq"),
            "--family",
            "qwen3",
            "--max-length",
            "512",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "1 sequences, 0 rejected" in result.output and "server ids match: n/a" in result.output
    manifest = json.loads((tmp_path / "seq" / "manifest.json").read_text())
    assert manifest["details"]["token_ids"]["think_open_ids"] == [151667]
    result = runner.invoke(
        cli,
        [
            "vocab",
            "--input",
            str(tmp_path / "seq"),
            "--tokenizer",
            str(family_dirs["qwen3"]),
            "--out",
            str(tmp_path / "vocab"),
            "--draft-vocab-size",
            "16",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "draft vocab 16 of 151936 ids covers 100.00%" in result.output


def test_a_family_whose_ids_do_not_match_the_tokenizer_is_one_clear_error(prefect_api, family_dirs, tmp_path, capsys):

    gen = write_generations(tmp_path / "gen", [record("a", USER, "Two.", " 4.")])
    err = cli_error(
        [
            "reconstruct",
            "--input",
            str(gen),
            "--tokenizer",
            str(family_dirs["kimi_k2_5"]),
            "--out",
            str(tmp_path / "seq"),
            "--family",
            "qwen3",
        ],
        capsys,
    )
    assert "end_of_turn_id is 151645 but the tokenizer maps '<|im_end|>' to 163586" in err


def test_the_flow_redoes_a_deleted_shard_instead_of_returning_its_cached_result(prefect_api, family_dirs, tmp_path):
    from flows.stages import stage_flow

    reconstruct_flow = stage_flow("reconstruct")

    target = TargetConfig(path=str(family_dirs["qwen3"]), **FAMILIES["qwen3"].target)
    gen = write_generations(tmp_path / "gen", [record("a", USER, "Two and two.", " 4.")])
    arguments = dict(cfg=ReconstructConfig(), target=target, generations_dir=str(gen), out_dir=str(tmp_path / "seq"))
    first = reconstruct_flow(**arguments)
    assert reconstruct_flow(**arguments).updated_at == first.updated_at  # complete: reused as is
    (tmp_path / "seq" / "part-00000.parquet").unlink()

    again = reconstruct_flow(**arguments)

    assert (tmp_path / "seq" / "part-00000.parquet").is_file()
    assert again.status == "complete" and again.shards == first.shards


def test_verify_checks_a_complete_runs_checksums_instead_of_returning_its_cached_result(
    prefect_api, family_dirs, tmp_path, monkeypatch
):
    import os

    import pytest

    from eagle3_core.run.checksums import ShardError
    from flows.stages import stage_flow

    reconstruct_flow = stage_flow("reconstruct")

    target = TargetConfig(path=str(family_dirs["qwen3"]), **FAMILIES["qwen3"].target)
    gen = write_generations(tmp_path / "gen", [record("a", USER, "Two and two.", " 4.")])
    arguments = dict(cfg=ReconstructConfig(), target=target, generations_dir=str(gen), out_dir=str(tmp_path / "seq"))
    reconstruct_flow(**arguments)
    reconstruct_flow(**arguments)  # complete: reused, and its result cached under the folders' state
    shard = tmp_path / "seq" / "part-00000.parquet"
    before, data = shard.stat(), bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # bit rot: the same size and the same mtime
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    monkeypatch.setenv("EAGLE3_VERIFY", "1")  # what `eagle3 --verify reconstruct` sets

    with pytest.raises(ShardError, match="part-00000.parquet"):
        reconstruct_flow(**arguments)


def test_a_tokenizer_changed_in_place_is_used_not_the_result_cached_under_its_path(prefect_api, tmp_path):
    """A chat template fixed upstream and downloaded over the old one (same path): reconstruct
    rebuilds with it, as its own keys say, rather than handing back what the old one made."""
    import pyarrow.parquet as pq

    from flows.stages import stage_flow

    reconstruct_flow = stage_flow("reconstruct")
    from tests.stages.reconstruct.families import build_family_tokenizer

    tokenizer = build_family_tokenizer(FAMILIES["qwen3"], tmp_path / "tok")
    target = TargetConfig(path=str(tokenizer), **FAMILIES["qwen3"].target)
    gen = write_generations(tmp_path / "gen", [record("a", USER, "Two and two.", " 4.")])
    arguments = dict(cfg=ReconstructConfig(), target=target, generations_dir=str(gen), out_dir=str(tmp_path / "seq"))
    reconstruct_flow(**arguments)
    reconstruct_flow(**arguments)  # complete: reused, and its result cached under the folders' state
    tokens = pq.read_table(tmp_path / "seq" / "part-00000.parquet", columns=["num_tokens"]).column(0).to_pylist()
    template = tokenizer / "chat_template.jinja"
    template.write_text("Updated template.\n" + template.read_text())

    again = reconstruct_flow(**arguments)

    assert (
        pq.read_table(tmp_path / "seq" / "part-00000.parquet", columns=["num_tokens"]).column(0).to_pylist()[0]
        > tokens[0]
    )
    assert again.status == "complete"
