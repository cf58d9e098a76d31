"""reconstruct over a damaged generations/ folder: one line naming the part and its fix, nothing written."""

from eagle3_core.reconstruct.config import ReconstructConfig
from eagle3_core.reconstruct.stage import run_reconstruct
from eagle3_core.target import TargetConfig
from tests.cli_helpers import cli_error, error_line
from tests.faults import snapshot, truncate
from tests.reconstruct.families import FAMILIES
from tests.reconstruct.records import record, write_generations

USER = [{"role": "user", "content": "What is 2 + 2?"}]


def test_a_truncated_generations_part_is_one_line_naming_it_and_sequences_are_untouched(
        prefect_api, family_dirs, tmp_path, capsys):
    gen = write_generations(tmp_path / "gen", [record(f"s{i}", USER, "Two and two.", " 4.") for i in range(40)],
                            shard_rows=20)
    target = TargetConfig(path=str(family_dirs["qwen3"]), **FAMILIES["qwen3"].target)
    run_reconstruct(ReconstructConfig(max_length=256), target, gen, tmp_path / "seq")   # an earlier run
    before = snapshot(tmp_path / "seq")
    truncate(gen / "accepted" / "part-00001.parquet")
    err = cli_error(["reconstruct", "--input", str(gen), "--tokenizer", str(family_dirs["qwen3"]), "--family", "qwen3",
                     "--out", str(tmp_path / "seq"), "--max-length", "512"], capsys)
    assert error_line(err).startswith("error: damaged generate shard part-00001.parquet: not a readable Parquet file")
    assert "fix: delete it and rerun `eagle3 generate`: the stage redoes that shard" in err
    assert snapshot(tmp_path / "seq") == before
