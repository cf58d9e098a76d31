"""Served as trained: a DFlash or DSpark export states the k it was trained for (``kinds.TRAINED_K``),
read the way vLLM 0.32 reads the block, and its model card launches that k. Drafting past the block
collapsed acceptance from 2.74 to 1.31 in a vLLM user's report (vLLM PR #41834)."""

import json
import shlex

import pytest
import torch

from eagle3_core.drafter.card import CARD_FILE, DEFAULT_K, launch_lines, read_meta, write_card
from eagle3_core.drafter.dflash import DFlashConfig, DFlashDrafter
from eagle3_core.drafter.dspark import DSparkConfig, DSparkDrafter
from eagle3_core.drafter.kinds import TRAINED_K, kind_of_export, trained_k
from eagle3_core.drafter.model import Eagle3Drafter
from tests.drafter.test_card import FACTS
from tests.drafter.test_dflash import TARGET
from tests.drafter.test_model import tiny_config
from tests.fixtures.requirements import vllm_source

# (kind, block_size, the k it drafts): DFlash's anchor slot predicts nothing, DSpark's predicts the first draft
BLOCKS = [("dflash", 6, 5), ("dspark", 5, 5)]


def block_export(kind: str, block: int, path):
    target = {**TARGET, "vocab_size": 50}
    torch.manual_seed(0)
    if kind == "dflash":
        section = {"block_size": block, "mask_token_id": 1, "num_hidden_layers": 1}
        DFlashDrafter(DFlashConfig.from_target(target, 50, [1, 2, 3], section)).save_export(path)
    else:
        section = {"block_size": block, "noise_token_id": 1, "num_hidden_layers": 1, "markov_rank": 4}
        DSparkDrafter(DSparkConfig.from_target(target, 50, [1, 2, 3], section)).save_export(path)
    return path


def config_of(export) -> dict:
    return json.loads((export / "config.json").read_text())


@pytest.mark.parametrize("kind,block,k", BLOCKS)
def test_each_block_export_states_its_block_and_the_k_it_was_trained_for(kind, block, k, tmp_path):
    export = block_export(kind, block, tmp_path)
    config = config_of(export)
    assert kind_of_export(export).name == kind
    assert config["block_size"] == block and config[TRAINED_K] == k == trained_k(config)


def test_the_stated_k_is_the_one_vllm_reads_from_the_block():
    """vLLM 0.32 defaults a DSpark drafter's k to its config's ``block_size`` and refuses DFlash's
    ``sample_from_anchor`` (its anchor slot never drafts: k = block_size - 1)."""
    speculative = vllm_source("config/speculative.py")
    assert 'block_size = getattr(hf_config, "block_size", None)' in speculative
    assert "self.num_speculative_tokens = block_size" in speculative
    dflash = vllm_source("v1/worker/gpu/spec_decode/dflash/speculator.py")
    assert "sample_from_anchor=True is not supported for DFlash" in dflash


@pytest.mark.parametrize("kind,block,k", BLOCKS)
def test_an_export_from_before_the_field_has_its_k_read_from_its_block(kind, block, k, tmp_path):
    config = config_of(block_export(kind, block, tmp_path))
    del config[TRAINED_K]
    assert trained_k(config) == k


def test_an_eagle3_export_has_no_block_and_states_no_k(tmp_path):
    Eagle3Drafter(tiny_config()).save_export(tmp_path)
    config = config_of(tmp_path)
    assert TRAINED_K not in config and trained_k(config) is None


@pytest.mark.parametrize("kind,block,k", BLOCKS)
def test_a_block_exports_card_launches_the_k_it_was_trained_for(kind, block, k, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    export = block_export(kind, block, tmp_path / "export")
    write_card(export, FACTS, {"steps": 10, "block_size": block, "num_speculative_tokens": k})
    vllm, _ = launch_lines(export, read_meta(export / CARD_FILE))
    words = shlex.split(vllm)
    spec = json.loads(words[words.index("--speculative-config") + 1])
    assert spec["method"] == kind and spec["num_speculative_tokens"] == k != DEFAULT_K
    assert vllm in (export / CARD_FILE).read_text()
