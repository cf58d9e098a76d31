"""Each stage's manifest details are typed (``eagle3_core.contracts.details``): writers build the
model, readers ask it, and the JSON on disk keeps its keys."""

from __future__ import annotations

import pytest

from eagle3_core.contracts.details import BY_STAGE, ExtractDetails, TrainDetails, VocabDetails
from eagle3_core.errors import InputError
from eagle3_core.run.manifest import StageManifest, read_manifest, write_manifest
from eagle3_core.stages import STAGE_NAMES


def manifest(stage: str, details: dict) -> StageManifest:
    return StageManifest(stage=stage, status="complete", config_hash="x", details=details)


def test_each_shipped_stage_has_a_details_model_and_each_model_names_a_declared_stage():
    """A details model is optional for a new stage (tests/flows/test_adding_a_stage.py adds one without)."""
    shipped = ("generate", "reconstruct", "vocab", "extract", "train", "evaluate")
    assert set(shipped) <= set(BY_STAGE) <= set(STAGE_NAMES)


def test_a_reader_given_a_manifest_missing_a_required_key_names_the_stage_and_the_key():
    with pytest.raises(InputError, match=r"the extract manifest's details\.hidden_size: Field required") as err:
        ExtractDetails.of(manifest("extract", {"layers": [1, 2, 3], "engine": "hf"}))
    assert "eagle3 extract" in err.value.fix
    with pytest.raises(InputError, match=r"the vocab manifest's details\.target_vocab_size"):
        VocabDetails.of(manifest("vocab", {"draft_vocab_size": 32}))


def test_an_old_manifests_dropped_key_is_ignored_and_a_missing_optional_one_is_none(tmp_path):
    old = {"layers": [1, 2, 3], "hidden_size": 64, "engine": "hf", "since_dropped": 1}
    write_manifest(tmp_path, manifest("extract", old))
    read = ExtractDetails.of(read_manifest(tmp_path))
    assert (read.layers, read.padding_share, read.shards_reused) == ([1, 2, 3], None, 0)


def test_a_writer_keeps_its_keys_and_refuses_one_its_model_does_not_declare():
    written = ExtractDetails(layers=[1, 2, 3], hidden_size=64, engine="hf", dtype="bfloat16").dump()
    assert written == {"layers": [1, 2, 3], "hidden_size": 64, "engine": "hf", "dtype": "bfloat16"}
    with pytest.raises(ValueError, match="engine_name"):
        ExtractDetails(layers=[1, 2, 3], hidden_size=64, engine="hf", engine_name="hf")


def test_train_and_evaluate_write_details_their_readers_read():
    from eagle3_core.contracts.evaluation import EvaluationReport
    from eagle3_core.stages.evaluate.stage import headline
    from eagle3_core.stages.train.inputs import TrainInputs
    from eagle3_core.stages.train.stage import complete_manifest

    inputs = TrainInputs("t", {}, "v", draft_vocab_size=32, aux_layer_ids=[1, 2, 3], mode="offline", tokens=9)
    final = {"step": 4, "sim_acceptance_length": 1.5, "acc_k": [0.5]}
    summary = {"steps": 4, "train_samples": 3, "heldout_samples": 1, "evals": {"final": final}, "world_size": 1}
    trained = complete_manifest(manifest("train", {}), summary, inputs)
    details = TrainDetails.of(trained)
    assert (details.sim_acceptance_length_final, details.mode, details.heldout_final) == (1.5, "offline", final)
    assert set(trained.details) == set(TrainDetails.model_fields) - {"online", "reject_reasons", "error"}
    report = {"settings": {"num_speculative_tokens": 3, "temperature": 0.0}, "offline": {"acceptance_length": 2.0}}
    evaluated = BY_STAGE["evaluate"].of(manifest("evaluate", headline(EvaluationReport.of(report))))
    assert (evaluated.k, evaluated.offline_acceptance_length, evaluated.online_acceptance_length) == (3, 2.0, None)
