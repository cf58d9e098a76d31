"""train.mode online-vllm without DeepSpeed: the spool, its budget, reuse or recompute, the batch order.

The engine here is the transformers engine on the tiny target (real forward passes, real
safetensors units on disk); the vLLM engine behind the same spool is tested in
tests/stages/train/test_online_vllm_toy.py.
"""

import threading
import time
from types import SimpleNamespace

import pytest
import torch

from eagle3_core.errors import ConfigError, StageError
from eagle3_core.spool.folder import Spool, unit_bytes
from eagle3_core.spool.producer import EngineProducer
from eagle3_core.stages.train.config import OnlineVllmConfig, TrainConfig
from eagle3_core.stages.train.data import BatchPlan, OfflineReader, split_heldout
from eagle3_core.stages.train.online_engine import build_engine
from eagle3_core.stages.train.online_vllm import SpoolReader, plan_units, requests_for
from eagle3_core.target.config import TargetConfig
from tests.stages.train.builders import HIDDEN, LAYERS, one_thread

BUDGET = 256  # micro-batch tokens


def batches_of(samples, epochs: int, seed: int = 0):
    train, heldout = split_heldout(sorted(samples, key=lambda s: s.sample_id), 0.15)
    plan = BatchPlan(train, BUDGET, seed)
    return [plan.batch(n) for n in range(epochs * plan.per_epoch)], heldout


def inputs_for(tiny_run):
    return SimpleNamespace(
        target_path=str(tiny_run.target),
        aux_layer_ids=LAYERS,
        hidden_size=HIDDEN,
        target_config={"num_hidden_layers": 4, "hidden_size": HIDDEN},
    )


def start(tiny_run, spool_dir, reader_run="run-1"):
    """A transformers engine serving ``spool_dir`` and a reader for the tiny run's sequences."""
    cfg = OnlineVllmConfig(engine="transformers", device="cpu")
    producer = EngineProducer(
        spool_dir,
        lambda: build_engine(cfg, TargetConfig(path=str(tiny_run.target)), LAYERS, 4, BUDGET, spool_dir / "engine"),
    )
    return producer, SpoolReader(tiny_run.sequences, spool_dir, reader_run, timeout_s=120)


def tiny_requests(sequences_dir, units, budget_bytes: int, consumers: int = 1):
    """Requests for units written by hand (no engine, no target): run "r", the tiny target's shape."""
    from eagle3_core.spool.folder import Requests

    return Requests(
        run_id="r",
        sequences_dir=str(sequences_dir),
        target_path="t",
        layers=LAYERS,
        num_hidden_layers=4,
        hidden_size=HIDDEN,
        budget_bytes=budget_bytes,
        consumers=consumers,
        units=units,
    )


def test_the_same_seed_gives_the_same_batches_from_disk_or_from_the_engine(tiny_run, tmp_path):
    from_disk, _ = batches_of(OfflineReader(tiny_run.hidden).samples(), 2)
    online, _ = batches_of(SpoolReader(tiny_run.sequences, tmp_path, "r", 1).samples(), 2)
    assert [[s.sample_id for s in b] for b in from_disk] == [[s.sample_id for s in b] for b in online]


def streamed_requests(tiny_run, reader):
    """Two epochs under a budget that keeps only the held-out set: the engine waits, units stream."""
    batches, heldout = batches_of(reader.samples(), 2)
    streamed = plan_units(batches, heldout, BUDGET, 0, HIDDEN, budget_bytes=0)
    held = sum(unit_bytes(sum(u.tokens), HIDDEN) for u in streamed.units if u.pinned)
    largest = max(unit_bytes(sum(u.tokens), HIDDEN) for u in streamed.units if not u.pinned)
    cfg = TrainConfig(micro_batch_tokens=BUDGET, online_vllm=OnlineVllmConfig(spool_gb=(held + 3 * largest) / 2**30))
    requests, plan = requests_for(reader, cfg, inputs_for(tiny_run), batches, heldout, world=1)
    return batches, requests, plan


def test_a_set_that_fits_is_computed_once_and_one_that_does_not_keeps_what_fits_and_states_the_rest(tiny_run, tmp_path):
    batches, heldout = batches_of(SpoolReader(tiny_run.sequences, tmp_path, "r", 1).samples(), 3)
    tokens = sum(s.length for s in {s.sample_id: s for b in batches for s in b}.values()) + sum(
        s.length for s in heldout
    )
    held = sum(s.length for s in heldout)
    fits = plan_units(batches, heldout, BUDGET, 0, HIDDEN, budget_bytes=1 << 30)
    assert fits.reuse and fits.computed_tokens == fits.unique_tokens == tokens
    assert all(u.pinned for u in fits.units) and "computed once and reused" in fits.describe()

    streamed = plan_units(batches, heldout, BUDGET, 0, HIDDEN, budget_bytes=0)  # no room to keep any
    assert not streamed.reuse and streamed.kept_tokens == held
    assert streamed.computed_tokens - held == 3 * (tokens - held)  # every epoch recomputes the train set

    half = plan_units(batches, heldout, BUDGET, 0, HIDDEN, budget_bytes=fits.states_bytes // 2 + 3 * 20_000)
    assert not half.reuse and held < half.kept_tokens < tokens
    assert half.computed_tokens == 3 * (tokens - held) + held - 2 * (half.kept_tokens - held)
    assert sum(unit_bytes(sum(u.tokens), HIDDEN) for u in half.units if u.pinned) <= half.budget_bytes
    assert f"{half.computed_tokens - half.unique_tokens:,} recomputed" in half.describe()
    assert half.figures()["recomputed_tokens"] == half.computed_tokens - tokens


def test_a_budget_that_cannot_hold_two_micro_batches_is_refused_with_the_size_to_set(tiny_run, tmp_path):
    reader = SpoolReader(tiny_run.sequences, tmp_path, "r", 1)
    batches, heldout = batches_of(reader.samples(), 1)
    cfg = TrainConfig(
        micro_batch_tokens=BUDGET,
        heldout_fraction=0.15,
        online_vllm=OnlineVllmConfig(spool_gb=unit_bytes(BUDGET, HIDDEN) / 2**30),
    )
    with pytest.raises(ConfigError, match="cannot hold the held-out states") as err:
        requests_for(reader, cfg, inputs_for(tiny_run), batches, heldout, world=1)
    assert "raise train.online_vllm.spool_gb to at least" in str(err.value)


def test_the_engine_waits_while_the_spool_is_full_and_the_trainer_deletes_what_it_read(tiny_run, tmp_path):
    spool_dir = tmp_path / "spool"
    producer, reader = start(tiny_run, spool_dir)
    batches, requests, plan = streamed_requests(tiny_run, reader)
    assert not plan.reuse
    offline, spool = OfflineReader(tiny_run.hidden), Spool(spool_dir)
    on_disk = {s.sample_id: s for s in offline.samples()}
    with one_thread(), producer:
        reader.begin(requests, plan, rank=0)
        while spool.status().get("state") != "full":  # the trainer reads nothing until the engine waits
            assert spool.status().get("state") != "failed", spool.status()
            time.sleep(0.05)
        assert spool.used_bytes() <= requests.budget_bytes
        assert spool.status()["units"] < len(plan.units)
        for batch in batches:
            got = reader.load(batch, BUDGET, torch.float32, "cpu")
            want = offline.load([on_disk[s.sample_id] for s in batch], BUDGET, torch.float32, "cpu")
            assert torch.equal(got["input_ids"], want["input_ids"]) and torch.equal(got["loss_mask"], want["loss_mask"])
            torch.testing.assert_close(got["aux"], want["aux"], atol=0.05, rtol=0.02)  # both bf16, batched vs alone
            torch.testing.assert_close(got["final"], want["final"], atol=0.05, rtol=0.02)
    status = producer.figures()  # once joined: the last unit can be read before the engine writes "done"
    assert status["state"] == "done" and status["units"] == len(plan.units) and status["room_wait_s"] > 0
    assert 0 < status["peak_bytes"] <= requests.budget_bytes
    left = sorted(p.name for p in spool_dir.glob("unit-*"))
    assert len(left) == sum(u.pinned for u in plan.units) > 0  # only the held-out units stay
    assert reader.stats()["units_read"] == len(batches)


def test_a_unit_the_trainer_deletes_the_moment_it_lands_does_not_fail_the_engine(tmp_path, monkeypatch):
    """The trainer may read and delete a unit before the engine's write returns (seen in CI)."""
    import os

    from eagle3_core.spool.folder import Unit, UnitWriter

    unit = Unit(sample_ids=["a", "b"], parts=["p", "p"], rows=[0, 1], tokens=[3, 2])
    requests = tiny_requests(tmp_path, [unit], budget_bytes=1 << 20)
    replace = os.replace

    def replace_then_consume(src, dst):  # the fastest possible trainer: reads and deletes on arrival
        replace(src, dst)
        os.unlink(dst)

    monkeypatch.setattr("eagle3_core.run.fsio.os.replace", replace_then_consume)
    states = [(torch.randn(n, 3, HIDDEN), torch.randn(n, HIDDEN)) for n in unit.tokens]
    size = UnitWriter(Spool(tmp_path), requests, 0).write([[5, 6, 7], [8, 9]], [[0, 1, 1], [1, 1]], states)
    assert size >= 5 * (8 * HIDDEN + 5)  # the unit's bytes, measured before it was handed over
    assert not list(tmp_path.glob("unit-*")) and not list(tmp_path.glob("*.tmp"))


def test_an_engine_that_fails_to_start_fails_the_trainer_at_once_with_its_error(tiny_run, tmp_path):
    def broken():
        raise ConfigError("no Python with vLLM found", fix="run `make setup`")

    reader = SpoolReader(tiny_run.sequences, tmp_path, "run-2", timeout_s=600)
    batches, heldout = batches_of(reader.samples(), 1)
    cfg = TrainConfig(micro_batch_tokens=BUDGET)
    requests, plan = requests_for(reader, cfg, inputs_for(tiny_run), batches, heldout, world=1)
    with EngineProducer(tmp_path, broken) as producer:
        reader.begin(requests, plan, rank=0)
        with pytest.raises(StageError, match="the hidden-state engine failed: ConfigError: no Python with vLLM"):
            reader.load(batches[0], BUDGET, torch.float32, "cpu")
    assert isinstance(producer.error, ConfigError)


def test_an_endpoint_serves_one_run_after_another_and_refuses_another_target(tiny_run, tmp_path):
    from eagle3_core.spool.producer import serve

    cfg = OnlineVllmConfig(engine="transformers", device="cpu")
    spool, stop = Spool(tmp_path), threading.Event()
    spool.root.mkdir(exist_ok=True)
    engine = lambda: build_engine(cfg, TargetConfig(path=str(tiny_run.target)), LAYERS, 4, BUDGET, tmp_path / "engine")  # noqa: E731
    thread = threading.Thread(target=serve, args=(spool, engine, stop, None, str(tiny_run.target), LAYERS), daemon=True)
    thread.start()
    try:
        for run in ("first", "second"):
            reader = SpoolReader(tiny_run.sequences, tmp_path, run, timeout_s=120)
            batches, heldout = batches_of(reader.samples(), 1)
            requests, plan = requests_for(
                reader, TrainConfig(micro_batch_tokens=BUDGET), inputs_for(tiny_run), batches[:2], heldout, world=1
            )
            reader.begin(requests, plan, rank=0)
            with one_thread():
                assert reader.load(batches[1], BUDGET, torch.float32, "cpu")["aux"].shape[-2:] == (3, HIDDEN)
        other = SpoolReader(tiny_run.sequences, tmp_path, "third", timeout_s=120)
        requests, plan = requests_for(
            other, TrainConfig(micro_batch_tokens=BUDGET), inputs_for(tiny_run), batches[:1], heldout, world=1
        )
        other.begin(requests.model_copy(update={"layers": [0, 1, 2]}), plan, rank=0)
        with pytest.raises(StageError, match=r"captures layers \[1, 2, 3\], the trainer asks for \[0, 1, 2\]"):
            other.load(batches[0], BUDGET, torch.float32, "cpu")
    finally:
        stop.set()
        thread.join(timeout=60)


def test_mode_auto_stores_the_states_when_they_fit_and_streams_them_when_they_do_not(tiny_run, tmp_path):
    from eagle3_core.stages.train.plan import Sizes, decide

    target = TargetConfig(path=str(tiny_run.target))
    plan = decide("auto", tiny_run.hidden, Sizes(target, tiny_run.sequences, headroom=1e18))
    assert plan.mode == "offline" and "hidden/ is complete" in plan.why  # an extracted set is used as it is
    plan = decide("auto", tmp_path / "hidden", Sizes(target, tiny_run.sequences, headroom=1.05))
    assert plan.mode == "offline" and "they fit" in plan.why
    plan = decide("auto", tmp_path / "hidden", Sizes(target, tiny_run.sequences, headroom=1e18))
    assert plan.mode == "online-vllm" and "do not fit" in plan.why and "tokens x" in plan.why
    assert decide("offline", tmp_path, Sizes(target, tiny_run.sequences, 1e18)).mode == "offline"


def test_the_pipeline_settles_mode_auto_before_extract_and_leaves_extract_out_when_states_do_not_fit(
    tiny_run, tmp_path
):
    import shutil

    from eagle3_core.config import PipelineConfig
    from eagle3_core.stages import BY_NAME

    shutil.copytree(tiny_run.sequences, tmp_path / "sequences")
    config = PipelineConfig(
        out=str(tmp_path), target=TargetConfig(path=str(tiny_run.target)), train=TrainConfig(mode="auto")
    )
    settle = BY_NAME["extract"].settle
    roomy, why = settle(config)
    assert roomy.train.mode == "offline" and "extract" in roomy.stages and "they fit" in why
    tight, why = settle(
        config.model_copy(update={"extract": config.extract.model_copy(update={"disk_headroom": 1e18})})
    )
    assert tight.train.mode == "online-vllm" and "extract" not in tight.stages and "do not fit" in why
    assert BY_NAME["train"].reads(tight) == ("reconstruct", "vocab")
    assert settle(PipelineConfig(out=str(tmp_path / "empty"), train=TrainConfig(mode="auto")))[0].train.mode == "auto"


def test_the_pipeline_deployments_form_selects_the_train_mode_and_names_an_endpoint():
    """The deployments' parameter is the pipeline config: its form offers every mode and the engine's settings."""
    from flows.pipeline import pipeline

    schema = pipeline.parameters.model_dump()
    found = schema.get("definitions") or schema["$defs"]
    assert found["TrainConfig"]["properties"]["mode"]["enum"] == ["offline", "online", "online-vllm", "auto"]
    assert {"endpoint", "spool_gb", "engine_devices", "train_devices"} <= set(found["OnlineVllmConfig"]["properties"])


def test_ranks_that_read_the_same_batch_in_different_epochs_each_read_their_own_unit(tmp_path):
    """A batch (here one long sample) comes back in a later epoch on another rank: each rank must
    read the unit made for its own turn, never the one another rank read and deleted."""
    from eagle3_core.spool.folder import UnitWriter
    from eagle3_core.stages.train.data import Sample

    a, b = Sample("a", 200, "p", 0), Sample("b", 180, "p", 1)
    batches = [[a], [b], [b], [a]]  # micro-batch n goes to rank n % 2: each sample to both ranks
    plan = plan_units(batches, [], BUDGET, 0, HIDDEN, budget_bytes=0)  # nothing kept: one streamed unit a batch
    assert not any(u.pinned for u in plan.units) and len(plan.units) == 4
    requests = tiny_requests(tmp_path, plan.units, budget_bytes=1 << 30, consumers=2)
    readers = [SpoolReader(tmp_path, tmp_path / "spool", "r", timeout_s=1) for _ in range(2)]
    for rank, reader in enumerate(readers):
        reader.begin(requests, plan, rank=rank, world=2)
    for index, unit in enumerate(plan.units):  # the engine's work, every unit at once
        n = unit.tokens[0]
        states = [(torch.full((n, 3, HIDDEN), float(index)), torch.zeros(n, HIDDEN))]
        UnitWriter(Spool(tmp_path / "spool"), requests, index).write([list(range(n))], [[1] * n], states)
    for n, batch in enumerate(batches):
        got = readers[n % 2].load(batch, BUDGET, torch.float32, "cpu")
        assert float(got["aux"][0, 0, 0, 0]) == n  # the unit made for micro-batch n
    assert not list((tmp_path / "spool").glob("unit-*"))  # each streamed unit read once, then deleted
