"""A changed model at the same path redoes extract, train and evaluate; a copied run stays complete.

Extract runs for real (a tiny random Llama on CPU); train's and evaluate's keys are the functions
their stages record as inputs (running DeepSpeed or vLLM adds nothing to what is keyed).
"""

import shutil
from types import SimpleNamespace

from eagle3_core.extract.config import ExtractConfig
from eagle3_core.extract.stage import run_extract
from eagle3_core.generate.config import PromptSource
from eagle3_core.target import TargetConfig
from tests.extract.helpers import build_tiny_llama, write_sequences


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
    from eagle3_core.train.config import TrainConfig
    from eagle3_core.train.stage import input_fingerprints

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
    from eagle3_core.evaluate.stage import evaluation_inputs

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
