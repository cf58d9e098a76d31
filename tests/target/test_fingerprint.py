"""Targets and drafters known by their bytes (eagle3_core/target/fingerprint.py), on real safetensors."""

import shutil

import pytest
import torch
from safetensors.torch import save_file

from eagle3_core.target.fingerprint import BLOCK, model_fingerprint, safetensors_data_start, sample_offsets


@pytest.fixture
def model(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    torch.manual_seed(0)
    save_file({"w": torch.randn(512, 1024), "b": torch.randn(1024)}, str(root / "model.safetensors"))  # 2 MiB
    (root / "config.json").write_text('{"hidden_size": 1024}\n')
    return root


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))


def test_the_same_bytes_at_another_path_have_the_same_fingerprint(model, tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(model, copy)  # new mtimes, new path

    assert model_fingerprint(copy) == model_fingerprint(model)


def test_weights_retrained_in_place_change_the_fingerprint(model):
    before = model_fingerprint(model)
    save_file({"w": torch.randn(512, 1024), "b": torch.randn(1024)}, str(model / "model.safetensors"))

    assert model_fingerprint(model) != before


def test_a_changed_config_changes_the_fingerprint(model):
    before = model_fingerprint(model)
    (model / "config.json").write_text('{"hidden_size": 1025}\n')

    assert model_fingerprint(model) != before


def test_a_few_bytes_between_the_samples_are_seen_under_verify_only(model):
    quick, verified = model_fingerprint(model, verify=False), model_fingerprint(model, verify=True)
    assert verified == quick  # the first full hash is kept beside the quick key
    path = model / "model.safetensors"
    data = bytearray(path.read_bytes())
    with open(path, "rb") as fh:
        offsets = sample_offsets(safetensors_data_start(fh, len(data)), len(data))
    gap = (offsets[7] + BLOCK + offsets[8]) // 2  # between two sampled blocks
    assert offsets[7] + BLOCK < gap < offsets[8]
    data[gap] ^= 0xFF
    path.write_bytes(bytes(data))

    assert model_fingerprint(model, verify=False) == quick  # the quick key cannot see it...
    assert model_fingerprint(model, verify=True) != quick  # ...the full hash does
