"""The held-out split and the batch plan are pure functions: a resumed run reads the same batches; a
batch of states that are not finite is refused, naming the sample."""

import pytest
import torch

from eagle3_core.stages.train.data import (
    BatchPlan,
    Sample,
    collate,
    pack_padded,
    padding_share,
    plan_batches,
    split_heldout,
)


def samples(n: int) -> list[Sample]:
    return [Sample(f"id-{i}", 5 + (i * 7) % 40, "shard-00000.safetensors", i * 100) for i in range(n)]


def test_the_heldout_split_depends_only_on_sample_ids():
    train, held = split_heldout(samples(200), 0.1)
    train2, held2 = split_heldout(list(reversed(samples(200))), 0.1)
    assert {s.sample_id for s in held} == {s.sample_id for s in held2}
    assert 5 <= len(held) <= 40 and len(train) + len(held) == 200


def test_a_tiny_set_still_holds_one_sample_out():
    train, held = split_heldout(samples(2), 0.01)
    assert len(held) == 1 and len(train) == 1


def test_batches_stay_within_the_token_budget_and_cover_every_sample_once_per_epoch():
    lengths = [s.length for s in samples(300)]
    batches = plan_batches(lengths, budget=128, seed=3, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(300))
    assert all(max(lengths[i] for i in b) * len(b) <= 128 or len(b) == 1 for b in batches)


def test_the_plan_is_the_same_after_a_restart_and_differs_between_epochs():
    a, b = BatchPlan(samples(100), 128, seed=1), BatchPlan(samples(100), 128, seed=1)
    assert [a.batch(n) for n in range(3 * a.per_epoch)] == [b.batch(n) for n in range(3 * b.per_epoch)]
    assert a.batch(0) != a.batch(a.per_epoch)


def test_packed_batches_fill_the_budget_with_summed_lengths_and_need_fewer_batches():
    lengths = [s.length for s in samples(300)]
    packed = plan_batches(lengths, budget=128, seed=3, epoch=0, pack=True)
    padded = plan_batches(lengths, budget=128, seed=3, epoch=0)
    assert sorted(i for b in packed for i in b) == list(range(300))
    assert all(sum(lengths[i] for i in b) <= 128 for b in packed)
    assert len(packed) < len(padded)


def test_collate_packs_samples_end_to_end_as_numbered_segments_or_pads_them():
    rows = {
        "input_ids": [torch.tensor([5, 6, 7]), torch.tensor([8])],
        "loss_mask": [torch.tensor([0, 1, 1]), torch.tensor([1])],
    }
    packed = collate(rows, pack=True)
    assert packed["input_ids"].tolist() == [[5, 6, 7, 8]] and packed["segments"].tolist() == [[1, 1, 1, 2]]
    padded = collate(rows, pack=False)
    assert padded["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert padded["segments"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert padding_share(padded) == 2 / 6 and padding_share(packed) == 0.0
    assert pack_padded(padded)["input_ids"].tolist() == packed["input_ids"].tolist()
    assert pack_padded(padded)["segments"].tolist() == packed["segments"].tolist()


def test_nan_states_the_target_makes_in_process_are_its_fault_naming_the_sample_and_its_part(tmp_path):
    """train.mode online: the same refusal, error and fix as extract's (``states.writer.refuse_non_finite``)."""
    from transformers import LlamaForCausalLM

    from eagle3_core.errors import StageError
    from eagle3_core.stages.train.data import OnlineReader
    from tests.stages.extract.helpers import build_tiny_llama, write_sequences

    model_dir = build_tiny_llama(tmp_path / "m", layers=4)
    model = LlamaForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        model.model.embed_tokens.weight[7] = float("nan")  # only token 7 poisons a sample
    model.save_pretrained(model_dir)
    rows = write_sequences(tmp_path / "seq", [[12, 12, 12]])
    reader = OnlineReader(tmp_path / "seq", str(model_dir), [1, 2, 3], trust_remote_code=False)
    poisoned_id = next(r["sample_id"] for r in rows if 7 in r["input_ids"])
    poisoned = next(s for s in reader.samples() if s.sample_id == poisoned_id)
    with pytest.raises(
        StageError, match=f"the target produced NaN or Inf in the hidden states of sample {poisoned.sample_id}"
    ) as err:
        reader.load([poisoned], 64, torch.float32, "cpu")
    assert err.value.path == str(tmp_path / "seq" / poisoned.where)
    assert "dtype" in err.value.fix
