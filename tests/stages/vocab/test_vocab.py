"""The draft vocabulary: top-N supervised ids, d2t offsets, t2d mask, coverage."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from safetensors.numpy import load_file

from eagle3_core.errors import InputError
from eagle3_core.stages.vocab.build import select
from eagle3_core.stages.vocab.config import VocabConfig
from eagle3_core.stages.vocab.stage import run_vocab
from eagle3_core.target.config import TargetConfig
from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer


def write_sequences(path, rows: list[tuple[list[int], list[int]]]) -> None:
    from eagle3_core.contracts import sequences

    path.mkdir(parents=True, exist_ok=True)
    records = [{"sample_id": str(i), "input_ids": ids, "loss_mask": mask} for i, (ids, mask) in enumerate(rows)]
    pq.write_table(sequences.rows_table(records), path / "part-00000.parquet")  # the contract's columns


def test_the_most_frequent_ids_become_the_draft_vocab_and_d2t_maps_back_to_them():
    counts = np.zeros(10, dtype=np.int64)
    counts[[7, 2, 9, 4]] = [50, 30, 30, 1]
    vocab = select(counts, 3)
    chosen = np.arange(3) + vocab.d2t  # target_id = draft_id + d2t[draft_id]
    assert chosen.tolist() == [2, 7, 9]  # draft ids in target-id order
    assert vocab.t2d.tolist() == [i in (2, 7, 9) for i in range(10)]
    assert vocab.coverage == pytest.approx(110 / 111)
    assert (np.arange(2) + select(counts, 2).d2t).tolist() == [2, 7]  # a tie (2 vs 9) goes to the lower id


def test_a_draft_vocab_larger_than_the_seen_ids_is_filled_with_the_lowest_unseen_ids():
    counts = np.zeros(6, dtype=np.int64)
    counts[[5, 3]] = [4, 2]
    vocab = select(counts, 4)
    assert (np.arange(4) + vocab.d2t).tolist() == [0, 1, 3, 5]
    assert vocab.coverage == 1.0


def test_the_draft_vocab_is_capped_by_the_target_vocab():
    vocab = select(np.ones(5, dtype=np.int64), 32000)
    assert len(vocab.d2t) == 5 and vocab.t2d.all()


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return build_family_tokenizer(FAMILIES["llama3"], tmp_path_factory.mktemp("tok") / "llama3")


def test_run_vocab_counts_only_supervised_tokens_and_reports_coverage(llama_dir, tmp_path):
    write_sequences(
        tmp_path / "seq", [([128000, 10, 11, 12, 128009], [0, 0, 1, 1, 1]), ([128000, 10, 12, 12], [0, 1, 1, 1])]
    )
    manifest = run_vocab(
        VocabConfig(draft_vocab_size=2), TargetConfig(path=str(llama_dir)), tmp_path / "seq", tmp_path / "vocab"
    )
    tensors = load_file(str(tmp_path / "vocab" / "vocab.safetensors"))
    assert tensors["counts"][[10, 11, 12, 128000, 128009]].tolist() == [1, 1, 3, 0, 1]
    assert (np.arange(2) + tensors["d2t"]).tolist() == [10, 12]  # 12 (3×), then 10/11/128009 (1×): lowest id
    assert tensors["t2d"].dtype == np.bool_ and tensors["t2d"].shape == (128256,)
    assert tensors["d2t"].dtype == np.int64
    assert manifest.details["coverage"] == pytest.approx(4 / 6)
    assert manifest.details["target_vocab_size"] == 128256 and manifest.details["draft_vocab_size"] == 2


def test_run_vocab_without_sequences_is_a_clear_error(llama_dir, tmp_path):
    with pytest.raises(InputError, match="no sequences found"):
        run_vocab(VocabConfig(), TargetConfig(path=str(llama_dir)), tmp_path / "missing", tmp_path / "vocab")


def test_ids_outside_the_target_vocab_are_refused(llama_dir, tmp_path):
    write_sequences(tmp_path / "seq", [([1, 200000], [1, 1])])
    with pytest.raises(InputError, match="outside the target vocabulary"):
        run_vocab(VocabConfig(), TargetConfig(path=str(llama_dir)), tmp_path / "seq", tmp_path / "vocab")
