"""A standing engine named by URL: the spool protocol over HTTP (``eagle3_core.spool.http``).

The engine is the real ``serve`` loop (requests, budget, unit files) behind the real HTTP server,
with a stand-in for the model whose states are a fixed function of the token ids, so the same
run gives the same bytes through a folder and through a URL.
"""

import contextlib
import socket
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from eagle3_core.errors import ConfigError, EndpointError, StageError
from eagle3_core.spool.folder import Spool
from eagle3_core.spool.http import UnitFetcher, engine_status, serve_http
from eagle3_core.spool.producer import serve
from eagle3_core.stages.train.config import OnlineVllmConfig, TrainConfig
from eagle3_core.stages.train.online_run import check_url_engine
from eagle3_core.stages.train.online_vllm import SpoolReader
from tests.stages.train.builders import HIDDEN, LAYERS
from tests.stages.train.test_online_vllm import BUDGET, inputs_for, streamed_requests


class StatesOfIds:
    """A stand-in engine: each token's states are a fixed function of its id."""

    def plan(self, lengths):
        return [SimpleNamespace(members=[i]) for i in range(len(lengths))]

    def forward(self, ids):
        out = []
        for x in ids:
            final = torch.tensor(x, dtype=torch.float32)[:, None] * 0.01 + torch.arange(HIDDEN) * 1e-3
            out.append((torch.stack([final + k for k in range(3)], dim=1), final))
        return out

    def close(self):
        pass


@contextlib.contextmanager
def standing_engine(spool_dir, target, layers=LAYERS):
    """``online_engine serve --spool spool_dir --http 127.0.0.1:0``, in threads; yields its URL."""
    spool, stop = Spool(spool_dir), threading.Event()
    spool.root.mkdir(parents=True, exist_ok=True)
    thread = threading.Thread(target=serve, args=(spool, StatesOfIds, stop, None, target, layers), daemon=True)
    thread.start()
    server = serve_http(spool, "127.0.0.1:0", target, layers)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        stop.set()
        thread.join(timeout=60)


def read_all(reader, requests, plan, batches):
    reader.begin(requests, plan, rank=0)
    return [reader.load(b, BUDGET, torch.float32, "cpu") for b in batches]


def test_units_fetched_by_url_are_the_folder_units_byte_for_byte_and_leave_the_engine_once_fetched(tiny_run, tmp_path):
    target = str(tiny_run.target)
    folder = SpoolReader(tiny_run.sequences, tmp_path / "folder", "run-1", timeout_s=60)
    batches, requests, plan = streamed_requests(tiny_run, folder)
    assert not plan.reuse
    with standing_engine(tmp_path / "folder", target):
        by_folder = read_all(folder, requests, plan, batches)

    local = tmp_path / "local"
    fetched = SpoolReader(tiny_run.sequences, local, "run-1", timeout_s=60)
    with standing_engine(tmp_path / "engine", target) as url, UnitFetcher(url, local, "run-1", 60) as fetcher:
        by_url = read_all(fetched, requests, plan, batches)
        deadline = time.monotonic() + 30  # the server deletes a unit just after its last byte went out
        while list((tmp_path / "engine").glob("unit-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        engine = engine_status(url)
    assert fetcher.error is None
    for want, got in zip(by_folder, by_url, strict=True):
        assert all(torch.equal(want[k], got[k]) for k in want)
    kept = sorted(p.name for p in local.glob("unit-*"))
    assert kept == sorted(p.name for p in (tmp_path / "folder").glob("unit-*")) and kept  # the held-out units
    assert all((local / name).read_bytes() == (tmp_path / "folder" / name).read_bytes() for name in kept)
    assert not list((tmp_path / "engine").glob("unit-*"))  # every unit left the engine once fetched
    assert engine["state"] == "done" and engine["units"] == len(plan.units)
    assert 0 < engine["peak_bytes"] <= requests.budget_bytes and engine["room_wait_s"] > 0


def test_an_unreachable_url_names_itself_and_the_command_that_starts_an_engine(tiny_run):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(EndpointError) as err:
        check_url_engine(url, inputs_for(tiny_run))
    assert f"no hidden-state engine answers at {url}" in str(err.value)
    assert "online_engine serve" in str(err.value) and "--http HOST:PORT" in str(err.value)


def test_an_engine_serving_other_layers_is_refused_before_the_run_and_if_asked_anyway(tiny_run, tmp_path):
    with standing_engine(tmp_path / "engine", str(tiny_run.target), layers=[0, 1, 2]) as url:
        with pytest.raises(ConfigError, match=r"captures layers \[0, 1, 2\], the trainer asks for \[1, 2, 3\]"):
            check_url_engine(url, inputs_for(tiny_run))
        reader = SpoolReader(tiny_run.sequences, tmp_path / "local", "run-2", timeout_s=60)
        batches, requests, plan = streamed_requests(tiny_run, reader)
        with (
            UnitFetcher(url, tmp_path / "local", "run-2", 60),
            pytest.raises(StageError, match=r"refused the run: .*captures layers \[0, 1, 2\]"),
        ):
            read_all(reader, requests, plan, batches)


def test_the_stage_reads_a_url_endpoint_through_its_own_spool_and_records_the_url(tiny_run, tmp_path):
    from eagle3_core.stages.train import online_run

    out, lines = tmp_path / "drafter", []
    reporter = SimpleNamespace(log=lines.append)
    with standing_engine(tmp_path / "engine", str(tiny_run.target)) as url:
        inputs = SimpleNamespace(**vars(inputs_for(tiny_run)), tokens=1000, sequences_dir=str(tiny_run.sequences))
        online = OnlineVllmConfig(endpoint=url, spool_gb=0.01)
        cfg = TrainConfig(mode="online-vllm", micro_batch_tokens=BUDGET, online_vllm=online)
        online_run.prepare(cfg, inputs, out, reporter)
        assert inputs.spool["dir"] == str(out / "spool") and f"via endpoint {url}" in lines[-1]
        reader = SpoolReader(tiny_run.sequences, inputs.spool["dir"], inputs.spool["run_id"], timeout_s=60)
        batches, requests, plan = streamed_requests(tiny_run, reader)
        with online_run.engine_for_run(cfg, None, inputs, out, reporter) as figures:
            assert read_all(reader, requests, plan, batches[:2])[1]["aux"].shape[-2:] == (3, HIDDEN)
    details = online_run.details({}, figures, cfg)
    assert details["endpoint"] == url and details["engine_tokens"] > 0 and figures["engine_error"] is None
    online_run.clean(cfg, out)
    assert not (out / "spool").exists() and list((tmp_path / "engine").glob("requests.json"))
