"""Bad inputs stop `run_train` with a clear error before the trainer starts (no step, no log)."""

import json
import shutil

import pytest

from eagle3_core.errors import InputError
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.stage import run_train
from eagle3_core.target.config import TargetConfig
from tests.stages.train import builders


def train(tiny_run, out, *, target=None, hidden=None, vocab=None):
    return run_train(
        TrainConfig(max_steps=1),
        TargetConfig(path=str(target or tiny_run.target)),
        hidden or tiny_run.hidden,
        vocab or tiny_run.vocab,
        out,
    )


def assert_nothing_ran(out):
    assert not (out / "train.log").exists() and not (out / "checkpoints").exists()


def test_hidden_states_narrower_than_the_target_are_refused(tiny_run, tmp_path):
    wider = tmp_path / "wider-target"
    shutil.copytree(tiny_run.target, wider)
    config = json.loads((wider / "config.json").read_text())
    (wider / "config.json").write_text(json.dumps({**config, "hidden_size": 128}))
    with pytest.raises(InputError, match=r"hidden states do not match the target.*\[T, 3, 128\]"):
        train(tiny_run, tmp_path / "drafter", target=wider)
    assert_nothing_ran(tmp_path / "drafter")


def test_a_vocab_from_another_tokenizer_is_refused(tiny_run, tmp_path):
    foreign = builders.build_vocab(tiny_run.sequences, tmp_path / "vocab", draft_vocab=48, vocab_size=120)
    with pytest.raises(InputError, match="vocab file from another tokenizer: t2d covers 120 target ids"):
        train(tiny_run, tmp_path / "drafter", vocab=foreign)
    assert_nothing_ran(tmp_path / "drafter")


def test_an_empty_dataset_is_refused(tiny_run, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    empty = tmp_path / "hidden"
    shutil.copytree(tiny_run.hidden, empty)
    pq.write_table(
        pa.table(
            {
                "sample_id": pa.array([], pa.string()),
                "shard": pa.array([], pa.string()),
                "offset": pa.array([], pa.int64()),
                "length": pa.array([], pa.int64()),
            }
        ),
        empty / "index.parquet",
    )
    with pytest.raises(InputError, match="empty dataset"):
        train(tiny_run, tmp_path / "drafter", hidden=empty)
    with pytest.raises(InputError, match="empty dataset: no index.parquet"):
        train(tiny_run, tmp_path / "drafter", hidden=tmp_path / "nowhere")
    assert_nothing_ran(tmp_path / "drafter")
