"""Every place that loads the target (extract's engine, the online engine, the in-trainer reader,
offline evaluation) loads one that ships its own code, through ``load_target_model``."""

import pytest
import torch

from eagle3_core.states.target_model import load_target_model
from eagle3_core.target.config import TargetConfig
from tests.states.remote_target import make_remote_target

LAYERS = [1, 2, 3]


@pytest.fixture(scope="module")
def remote_target(tmp_path_factory):
    return make_remote_target(tmp_path_factory.mktemp("remote") / "target")


def _is_remote(model) -> bool:
    return type(model).__name__ == "RemoteTinyForCausalLM"


def test_the_target_really_needs_trust_remote_code(remote_target):
    """Without the flag transformers refuses it: so the loads below prove the flag was passed."""
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_target_model(remote_target, trust_remote_code=False)
    assert _is_remote(load_target_model(remote_target, trust_remote_code=True))


def test_extract_loads_a_target_that_ships_its_own_code(remote_target, tmp_path):
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.engine_cache import get_engine, release_engines

    target = TargetConfig(path=str(remote_target), trust_remote_code=True)
    engine = get_engine(ExtractConfig(device="cpu"), target, LAYERS, 6, longest=8, workdir=tmp_path)
    try:
        assert _is_remote(engine.model)
        [(aux, final)] = engine.forward([[1, 2, 3]])
        assert aux.shape == (3, 3, 64) and final.shape == (3, 64)
    finally:
        release_engines()


def test_the_online_engine_loads_a_target_that_ships_its_own_code(remote_target, tmp_path):
    from eagle3_core.stages.train.config import OnlineVllmConfig
    from eagle3_core.stages.train.online_engine import build_engine

    target = TargetConfig(path=str(remote_target), trust_remote_code=True)
    engine = build_engine(
        OnlineVllmConfig(engine="transformers", device="cpu"), target, LAYERS, 6, longest=8, workdir=tmp_path
    )
    try:
        assert _is_remote(engine.model)
    finally:
        engine.close()


def test_the_in_trainer_reader_loads_a_target_that_ships_its_own_code(remote_target, tmp_path):
    from eagle3_core.stages.train.data import OnlineReader

    reader = OnlineReader(tmp_path, str(remote_target), LAYERS, trust_remote_code=True)
    assert _is_remote(reader._target(torch.float32, "cpu"))


def test_offline_evaluation_loads_a_target_that_ships_its_own_code(remote_target, tmp_path):
    from eagle3_core.stages.evaluate.offline import ChainDecoder
    from tests.stages.evaluate.models import make_export

    export = make_export(tmp_path / "export", remote_target)
    decoder = ChainDecoder.load(remote_target, export, trust_remote_code=True)
    assert _is_remote(decoder.target)


def test_a_standing_engine_loads_a_target_that_ships_its_own_code(remote_target, tmp_path, monkeypatch):
    """``python -m eagle3_core.stages.train.online_engine serve --trust-remote-code ...``: the engine it
    would serve with (the serving loop is replaced by one that builds the engine and returns)."""
    from eagle3_core.stages.train import online_engine

    built = []
    monkeypatch.setattr(online_engine, "serve", lambda spool, factory, *a, **k: built.append(factory()))
    argv = ["serve", "--spool", str(tmp_path), "--target", str(remote_target), "--layers", "1,2,3", "--max-tokens", "8"]
    online_engine.main([*argv, "--trust-remote-code", "--config", '{"engine": "transformers", "device": "cpu"}'])
    assert _is_remote(built[0].model)
