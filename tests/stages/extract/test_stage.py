"""run_extract writes the hidden/ contract, resumes by shard, and refuses what it cannot do."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from safetensors import safe_open

from eagle3_core.errors import InputError, StageError
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.extract.stage import run_extract
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import RecordingReporter
from tests.stages.extract.helpers import read_hidden, write_sequences

LAYERS = [1, 3, 4]


def _cfg(**kw):
    return ExtractConfig(**{"layers": LAYERS, "shard_tokens": 50, "max_tokens_per_batch": 64, **kw})


def test_hidden_follows_the_contract(tiny_llama, tmp_path):
    rows = write_sequences(tmp_path / "seq", [[10, 20, 5, 30], [7, 0, 12]])
    manifest = run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", tmp_path / "hidden")
    out = tmp_path / "hidden"
    shards = sorted(p.name for p in out.glob("shard-*.safetensors"))
    assert shards == [f"shard-{i:05d}.safetensors" for i in range(len(shards))] and len(shards) >= 2
    with safe_open(out / shards[0], "pt") as f:
        t = f.get_slice("aux_hidden_states").get_shape()[0]
        assert f.get_slice("aux_hidden_states").get_dtype() == "BF16"
        assert f.get_tensor("aux_hidden_states").shape == (t, 3, 64)
        assert f.get_tensor("final_hidden_states").dtype == torch.bfloat16
        assert f.get_tensor("final_hidden_states").shape == (t, 64)
        assert f.get_tensor("input_ids").dtype == torch.int32
        assert f.get_tensor("loss_mask").dtype == torch.uint8
    index = pq.read_table(out / "index.parquet").to_pylist()
    assert sorted((r["sample_id"], r["length"]) for r in index) == [(r["sample_id"], r["num_tokens"]) for r in rows]
    assert set(index[0]) == {"sample_id", "shard", "offset", "length"}
    stored = read_hidden(out)
    assert all(stored[r["sample_id"]]["input_ids"].tolist() == r["input_ids"] for r in rows)
    assert manifest.status == "complete"
    assert manifest.counts["samples"] == 7 and manifest.counts["tokens"] == 84
    details = json.loads((out / "manifest.json").read_text())["details"]
    assert {k: details[k] for k in ("layers", "hidden_size", "num_hidden_layers", "vocab_size", "engine")} == {
        "layers": LAYERS,
        "hidden_size": 64,
        "num_hidden_layers": 6,
        "vocab_size": 256,
        "engine": "transformers",
    }
    assert 0.0 <= details["padding_share"] < 0.5
    assert not [p for p in out.rglob("*") if p.suffix in {".bin", ".pt", ".pkl", ".tmp"}]


def test_shard_bytes_are_the_states_plus_a_header_under_one_percent(tiny_llama, tmp_path):
    write_sequences(tmp_path / "seq", [[200, 180, 150]])
    manifest = run_extract(
        ExtractConfig(layers=LAYERS, shard_tokens=10_000),
        TargetConfig(path=str(tiny_llama)),
        tmp_path / "seq",
        tmp_path / "h",
    )
    per_token = manifest.counts["bytes"] / manifest.counts["tokens"]
    assert 4 * 64 * 2 + 5 <= per_token <= (4 * 64 * 2 + 5) * 1.01


_KILLER = textwrap.dedent("""
    import os, signal, sys
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.target.config import TargetConfig

    class KillAfterTwoShards:
        def progress(self, stage, done, total, **figures):
            if done == 2:
                os.kill(os.getpid(), signal.SIGKILL)  # a real kill, mid-run
        def log(self, message):
            pass

    model, seq, out = sys.argv[1:]
    run_extract(ExtractConfig(layers=[1, 3, 4], shard_tokens=50, max_tokens_per_batch=64),
                TargetConfig(path=model), seq, out, KillAfterTwoShards())
""")


def test_a_killed_run_restarts_and_finishes_only_the_missing_shards(tiny_llama, tmp_path):
    rows = write_sequences(tmp_path / "seq", [[30, 25, 40, 12, 33, 8], [21, 19]])
    out = tmp_path / "hidden"
    killed = subprocess.run(
        [sys.executable, "-c", _KILLER, str(tiny_llama), str(tmp_path / "seq"), str(out)],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*.safetensors")}
    assert sorted(before) == ["shard-00000.safetensors", "shard-00001.safetensors"]
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"
    assert not (out / "index.parquet").exists()

    lines = RecordingReporter()
    manifest = run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", out, lines)
    assert manifest.details["shards_reused"] == 2
    assert all((out / name).stat().st_mtime_ns == t for name, t in before.items())
    computed = [line for line in lines.lines if "tokens/s" in line]
    assert len(computed) == manifest.counts["shards"] - 2
    assert all("shard-00000" not in line and "shard-00001" not in line for line in computed)
    fresh = tmp_path / "fresh"
    run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", fresh)
    resumed, clean = read_hidden(out), read_hidden(fresh)
    for r in rows:
        assert torch.equal(resumed[r["sample_id"]]["aux"], clean[r["sample_id"]]["aux"])
        assert torch.equal(resumed[r["sample_id"]]["final"], clean[r["sample_id"]]["final"])


def test_a_torn_or_foreign_shard_is_recomputed(tiny_llama, tmp_path):
    write_sequences(tmp_path / "seq", [[30, 25, 40]])
    out = tmp_path / "hidden"
    run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", out)
    (out / "shard-00000.safetensors").write_bytes(b"\x10\x00torn")
    (out / "manifest.json").unlink()
    manifest = run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", out)
    assert manifest.details["shards_reused"] == manifest.counts["shards"] - 1
    other = run_extract(
        ExtractConfig(layers=[0, 2, 5], shard_tokens=50), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", out
    )
    assert other.details["shards_reused"] == 0 and other.details["layers"] == [0, 2, 5]


def _reconstructed(seq: Path, config_hash: str) -> None:
    """A complete sequences/ manifest, as reconstruct leaves it (another config: another fingerprint)."""
    from eagle3_core.run.manifest import StageManifest, write_manifest

    write_manifest(seq, StageManifest(stage="reconstruct", status="complete", config_hash=config_hash))


def test_sequences_rebuilt_with_the_same_ids_and_lengths_are_extracted_again(tiny_llama, tmp_path):
    # reconstruct rerun with another chat setting (a date_string, say): the same samples, the same
    # lengths, other tokens; hidden/ must hold the new tokens' states, never the old run's
    seq, out = tmp_path / "seq", tmp_path / "hidden"
    write_sequences(seq, [[30, 25, 40]], seed=0)
    _reconstructed(seq, "first")
    run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), seq, out)
    rows = write_sequences(seq, [[30, 25]], seed=1)
    _reconstructed(seq, "second")
    manifest = run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), seq, out)
    stored = read_hidden(out)
    assert {sid: s["input_ids"].tolist() for sid, s in stored.items()} == {r["sample_id"]: r["input_ids"] for r in rows}
    assert manifest.details["shards_reused"] == 0
    named = set(pq.read_table(out / "index.parquet")["shard"].to_pylist())
    assert (
        {p.name for p in out.glob("shard-*.safetensors")}
        == named
        == {n for n in manifest.shards if n != "index.parquet"}
    )


def test_a_run_with_other_inputs_refused_for_disk_space_leaves_no_complete_manifest_behind(tiny_llama, tmp_path):
    seq, out = tmp_path / "seq", tmp_path / "hidden"
    write_sequences(seq, [[30, 25]], seed=0)
    _reconstructed(seq, "first")
    run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), seq, out)
    write_sequences(seq, [[30, 25]], seed=1)
    _reconstructed(seq, "second")
    with pytest.raises(StageError, match="hidden states need"):
        run_extract(_cfg(disk_headroom=1e18), TargetConfig(path=str(tiny_llama)), seq, out)
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"


def test_a_complete_run_is_skipped_without_loading_the_target(tiny_llama, tmp_path, monkeypatch):
    import eagle3_core.stages.extract.engine_cache as engines

    write_sequences(tmp_path / "seq", [[30, 25]])
    out = tmp_path / "hidden"
    first = run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", out)
    lines = RecordingReporter()
    monkeypatch.setattr(engines, "_build", lambda *a: pytest.fail("the target was loaded for a complete stage"))
    # another batch budget changes only speed: the stage is still complete
    again = run_extract(_cfg(max_tokens_per_batch=8), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", out, lines)
    assert again == first
    assert any("skipped" in line for line in lines.lines)


def test_nan_states_are_refused_with_the_sample_id(tmp_path):
    from transformers import LlamaForCausalLM

    from tests.stages.extract.helpers import build_tiny_llama

    model_dir = build_tiny_llama(tmp_path / "m")
    model = LlamaForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        model.model.embed_tokens.weight[7] = float("nan")  # only token 7 poisons a sample
    model.save_pretrained(model_dir)
    rows = write_sequences(tmp_path / "seq", [[12, 12, 12]])
    poisoned = next(r for r in rows if 7 in r["input_ids"])
    clean_rows = [r for r in rows if 7 not in r["input_ids"]]
    assert clean_rows, "the seed must leave some samples clean"
    with pytest.raises(StageError, match="NaN or Inf") as err:
        run_extract(_cfg(), TargetConfig(path=str(model_dir)), tmp_path / "seq", tmp_path / "hidden")
    assert f"sample: {poisoned['sample_id']}" in str(err.value)
    assert not list((tmp_path / "hidden").glob("*.safetensors*"))


def test_storage_cost_is_printed_and_a_run_that_cannot_fit_refuses_to_start(tiny_llama, tmp_path):
    write_sequences(tmp_path / "seq", [[100, 28]])
    lines = RecordingReporter()
    with pytest.raises(StageError, match="hidden states need") as err:
        run_extract(
            _cfg(disk_headroom=1e18), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", tmp_path / "hidden", lines
        )
    assert "free disk space" in str(err.value)
    assert f"eagle3 train --mode online-vllm --input {tmp_path / 'seq'} --target {tiny_llama}" in str(err.value)
    assert any("128 tokens x 512 B" in line and "free at" in line for line in lines.lines)
    assert not list((tmp_path / "hidden").glob("shard-*"))


def test_user_mistakes_are_clear_errors(tiny_llama, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no sequences found") as err:
        run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "empty", tmp_path / "h")
    assert "eagle3 reconstruct" in str(err.value)
    write_sequences(tmp_path / "seq", [[10]])
    with pytest.raises(InputError, match="config.json"):  # the input is checked first, then the target
        run_extract(_cfg(), TargetConfig(path=str(tmp_path)), tmp_path / "seq", tmp_path / "h")
    with pytest.raises(ValueError, match="mode"):  # no such option: training decides online or offline (train.mode)
        _cfg(mode="online")


def test_the_training_reader_reads_what_extract_writes(tiny_llama, tmp_path):
    from eagle3_core.stages.train import data, inputs

    rows = write_sequences(tmp_path / "seq", [[30, 25, 40], [12, 0]])
    run_extract(_cfg(), TargetConfig(path=str(tiny_llama)), tmp_path / "seq", tmp_path / "hidden")
    assert inputs.check_hidden(tmp_path / "hidden", 64) == (5, 107, LAYERS)
    reader = data.OfflineReader(tmp_path / "hidden")
    samples = reader.samples()
    batch = reader.load(samples, budget=64, dtype=torch.float32, device="cpu")
    stored = read_hidden(tmp_path / "hidden")
    for i, s in enumerate(samples):
        want = stored[s.sample_id]
        n = want["input_ids"].shape[0]
        assert batch["input_ids"][i, :n].tolist() == want["input_ids"].tolist()
        assert torch.equal(batch["aux"][i, :n], want["aux"].float())
    assert len(samples) == len([r for r in rows if r["num_tokens"] > 0])
