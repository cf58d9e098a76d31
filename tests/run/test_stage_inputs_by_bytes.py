"""A changed model at the same path redoes extract, train and evaluate; a copied run stays complete.

Extract runs for real (a tiny random Llama on CPU); train's and evaluate's keys are the functions
their stages record as inputs (running DeepSpeed or vLLM adds nothing to what is keyed).
"""

import shutil
from types import SimpleNamespace

from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.extract.config import ExtractConfig
from eagle3_core.stages.extract.stage import run_extract
from eagle3_core.target.config import TargetConfig
from tests.stages.extract.helpers import build_tiny_llama, write_sequences
from tests.stages.train.keys import train_key


def retrain_in_place(model):
    build_tiny_llama(model, layers=6, seed=1)  # the same path and shapes, other weights


def test_extract_redoes_its_work_when_the_target_changes_in_place(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    model = build_tiny_llama(tmp_path / "target", layers=6)
    write_sequences(tmp_path / "seq", [[10, 20]])
    run = lambda: run_extract(  # noqa: E731
        ExtractConfig(layers=[1, 3, 4], device="cpu"), TargetConfig(path=str(model)), tmp_path / "seq", tmp_path / "h"
    )
    first = run()
    assert run().updated_at == first.updated_at  # unchanged: skipped

    retrain_in_place(model)

    assert run().updated_at != first.updated_at


def test_trains_key_changes_with_the_targets_bytes_not_its_path(tmp_path):
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.stage import input_fingerprints

    model = build_tiny_llama(tmp_path / "target", layers=2)
    inputs = SimpleNamespace(mode="offline", target_path=str(model), hidden_dir=str(tmp_path / "hidden"))
    before = input_fingerprints(TrainConfig(), inputs, tmp_path / "vocab")
    shutil.copytree(model, tmp_path / "copy")
    copied = input_fingerprints(
        TrainConfig(), SimpleNamespace(**{**vars(inputs), "target_path": str(tmp_path / "copy")}), tmp_path / "vocab"
    )
    retrain_in_place(model)

    assert copied == before
    assert input_fingerprints(TrainConfig(), inputs, tmp_path / "vocab")["target"] != before["target"]


def test_evaluates_key_follows_the_target_and_drafter_bytes_so_a_copied_run_is_complete(tmp_path):
    from eagle3_core.stages.evaluate.stage import evaluation_inputs

    model = build_tiny_llama(tmp_path / "target", layers=2)
    export = build_tiny_llama(tmp_path / "run" / "drafter" / "export", layers=1, seed=5)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "Q"}\n')
    before = evaluation_inputs(PromptSource(input=str(prompts)), str(model), export, None)
    shutil.copytree(tmp_path / "run", tmp_path / "copied-run")  # new mtimes

    copied = evaluation_inputs(
        PromptSource(input=str(prompts)), str(model), tmp_path / "copied-run" / "drafter" / "export", None
    )
    retrain_in_place(model)
    changed = evaluation_inputs(PromptSource(input=str(prompts)), str(model), export, None)

    assert copied == before
    assert changed["target"] != before["target"] and changed["drafter"] == before["drafter"]


# --- moved, not changed: the same bytes at another path are the same work ------------------------


def test_generate_keys_its_prompts_by_their_bytes_so_a_moved_file_is_the_same_input(tmp_path, monkeypatch):
    from eagle3_core.stages.generate.config import GenerateConfig
    from eagle3_core.stages.generate.stage import stage_keys

    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    first = tmp_path / "a" / "prompts.jsonl"
    first.parent.mkdir()
    first.write_text('{"prompt": "Q1"}\n{"prompt": "Q2"}\n')
    keys = lambda path: stage_keys(GenerateConfig(prompts=PromptSource(input=str(path)), model="m"))  # noqa: E731
    before = keys(first)
    moved = tmp_path / "b" / "elsewhere.jsonl"
    moved.parent.mkdir()
    shutil.copy(first, moved)  # a new path and a new mtime

    assert keys(moved) == before
    moved.write_text('{"prompt": "Q1"}\n{"prompt": "Q3"}\n')  # same size, other bytes
    assert keys(moved)[1] != before[1]


def test_extract_skips_when_the_target_folder_moves(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    model = build_tiny_llama(tmp_path / "target", layers=6)
    write_sequences(tmp_path / "seq", [[10, 20]])
    run = lambda path: run_extract(  # noqa: E731
        ExtractConfig(layers=[1, 3, 4], device="cpu"), TargetConfig(path=str(path)), tmp_path / "seq", tmp_path / "h"
    )
    first = run(model)
    moved = shutil.move(model, tmp_path / "models" / "target")

    assert run(moved).updated_at == first.updated_at  # skipped: the same bytes


def test_a_finished_stage_folder_is_the_same_input_wherever_it_moves(tmp_path, monkeypatch):
    """A downstream stage keys an upstream folder by its manifest's content (config, inputs, counts)."""
    from eagle3_core.run.manifest import input_fingerprint

    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    model = build_tiny_llama(tmp_path / "target", layers=6)
    write_sequences(tmp_path / "seq", [[10, 20]])
    run_extract(
        ExtractConfig(layers=[1, 3, 4], device="cpu"), TargetConfig(path=str(model)), tmp_path / "seq", tmp_path / "h"
    )
    before = input_fingerprint(tmp_path / "h")

    assert input_fingerprint(shutil.move(tmp_path / "h", tmp_path / "runs" / "hidden")) == before


def test_evaluate_skips_when_the_target_the_drafter_the_prompts_and_vllm_move(tmp_path, monkeypatch):
    from eagle3_core.serve import ServeConfig
    from eagle3_core.stages.evaluate.config import EvaluateConfig
    from eagle3_core.stages.evaluate.stage import EvaluateStage

    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    build_tiny_llama(tmp_path / "a" / "target", layers=2)
    build_tiny_llama(tmp_path / "a" / "export", layers=1, seed=5)
    (tmp_path / "a" / "prompts.jsonl").write_text('{"prompt": "Q"}\n')

    def keys(root, python):
        cfg = EvaluateConfig(prompts=PromptSource(input=str(root / "prompts.jsonl")))
        serve = ServeConfig(python=python, log_dir=str(root / "logs"))
        stage = EvaluateStage(
            cfg, TargetConfig(path=str(root / "target")), str(root / "export"), str(root / "out"), serve
        )
        return stage.keys()

    before = keys(tmp_path / "a", "/opt/vllm-a/bin/python")
    shutil.copytree(tmp_path / "a", tmp_path / "b")

    assert keys(tmp_path / "b", "/opt/vllm-b/bin/python") == before


def test_evaluates_key_is_the_dtype_vllm_serves_in_not_the_unset_field(tmp_path, monkeypatch):
    """An unset ``serve.dtype`` keys as what it resolves to: bf16 where the CPU computes it (the key an
    explicit bfloat16 had), fp32 on a CPU without bf16 kernels (that machine's answer stands in for
    this one's, which a test cannot change), so a run carried to such a machine is evaluated again."""
    from eagle3_core.serve import ServeConfig, vllm_server
    from eagle3_core.stages.evaluate.config import EvaluateConfig
    from eagle3_core.stages.evaluate.stage import EvaluateStage

    build_tiny_llama(tmp_path / "target", layers=2)
    build_tiny_llama(tmp_path / "export", layers=1, seed=5)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Q"}\n')
    cfg = EvaluateConfig(prompts=PromptSource(input=str(tmp_path / "prompts.jsonl")))

    def key(bf16_kernels: bool, dtype: str | None) -> str:
        monkeypatch.setattr(vllm_server, "cpu_computes_bf16", lambda: bf16_kernels)
        serve = ServeConfig(device="cpu", dtype=dtype)
        target = TargetConfig(path=str(tmp_path / "target"))
        return EvaluateStage(cfg, target, str(tmp_path / "export"), str(tmp_path / "out"), serve).keys()[0]

    assert key(True, None) == key(True, "bfloat16") != key(True, "float32")
    assert key(False, None) == key(False, "float32") != key(True, None)


def test_train_keys_a_deepspeed_config_by_its_bytes_not_its_path(tmp_path):
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.stage import input_fingerprints

    model = build_tiny_llama(tmp_path / "target", layers=2)
    inputs = SimpleNamespace(mode="offline", target_path=str(model), hidden_dir=str(tmp_path / "hidden"))
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "ds.json").write_text('{"gradient_clipping": 1.0}')
    a, b = (TrainConfig(deepspeed_config=str(tmp_path / f / "ds.json")) for f in ("a", "b"))

    assert train_key(a) == train_key(b)
    assert input_fingerprints(a, inputs, tmp_path / "vocab") == input_fingerprints(b, inputs, tmp_path / "vocab")
    (tmp_path / "b" / "ds.json").write_text('{"gradient_clipping": 2.0}')
    assert input_fingerprints(b, inputs, tmp_path / "vocab") != input_fingerprints(a, inputs, tmp_path / "vocab")
