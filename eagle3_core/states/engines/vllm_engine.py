"""The vLLM engine: the target's states as vLLM computes them, for targets only vLLM can hold.

A worker process (``vllm_side/eagle3_extract_worker.py``, run with the vLLM venv's Python)
holds an offline ``vllm.LLM`` with the ``extract_hidden_states`` speculative method and the
project's connector, which writes ``{hidden_states [T, 4, H], token_ids [T]}`` per request.
The worker is asked for layers ``[low, mid, high, N]``: id N is the last decoder layer's
output before the final norm, so the final norm is applied here, with the target's own
norm weight and epsilon read from its files, and ``hidden/`` means the same as with
transformers. Each shard goes to vLLM as one request list (vLLM batches by itself, so
no padding is computed); the files are read back under their lock, checked against the
prompt ids, and deleted. The worker runs under ``serve.process.start_engine`` (it dies with the
process that started it, SIGKILL included) and works in ``workdir``, a folder of the run
(``worker.log`` stays there; ``states/`` goes with ``close``), never $TMPDIR.

The final norm here is Llama-style RMSNorm (``weight * x / rms(x)``, Llama, Qwen, DeepSeek,
Kimi); a target with another final norm is refused rather than silently mis-normed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_core.errors import ConfigError, StageError
from eagle3_core.serve.locate import vllm_python
from eagle3_core.serve.one_process import ENV as ENGINE_IN_PROCESS
from eagle3_core.serve.one_process import one_process
from eagle3_core.serve.process import start_engine
from eagle3_core.states.engines.batching import Batch
from eagle3_core.target.hardware import server_device

if TYPE_CHECKING:
    import torch

SIDE = Path(__file__).resolve().parent / "vllm_side"
NON_RMS_FAMILIES = {"gemma", "gemma2", "gemma3", "gemma3_text", "olmo", "phi", "gpt2", "gpt_neox"}


def final_norm(target_path: str):
    """(weight fp32 [H], eps) of the target's final RMSNorm, read from its safetensors files."""
    import torch
    from safetensors import safe_open

    from eagle3_core.contracts.target import language_config

    root = Path(target_path)
    config = language_config(root)
    if config.get("model_type") in NON_RMS_FAMILIES:
        raise ConfigError(
            f"the vLLM engine applies a Llama-style final RMSNorm; {config['model_type']} differs",
            fix="use --engine transformers for this target",
        )
    eps = float(config.get("rms_norm_eps", 1e-6))
    for name in ("model.norm.weight", "model.language_model.norm.weight", "language_model.model.norm.weight"):
        for file in sorted(root.glob("*.safetensors")):
            with safe_open(file, "pt") as f:
                if name in f.keys():
                    return f.get_tensor(name).to(torch.float32), eps
    raise ConfigError(
        "the target's final norm weight (model.norm.weight) was not found in its safetensors files",
        path=str(root),
        fix="use --engine transformers for this target",
    )


def apply_rms_norm(x: "torch.Tensor", weight: "torch.Tensor", eps: float) -> "torch.Tensor":
    """Llama's RMSNorm in fp32 (as transformers computes it)."""
    import torch

    x = x.to(torch.float32)
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


@dataclass(frozen=True)
class VllmOptions:
    """How the worker's vLLM starts: extract's ``vllm_*`` fields (``ExtractConfig.vllm_options``), or
    online training's (``train.online_engine``)."""

    python: str | None = None  # the vLLM environment's Python; None = located (serve.locate)
    kv_cache_bytes: int | None = None
    tensor_parallel_size: int = 1
    max_model_len: int | None = None  # None = the longest sample + 1


class VllmEngine:
    """Same interface as TransformersEngine: ``plan``, ``forward``, ``close``."""

    name = "vllm"

    def __init__(
        self,
        options: VllmOptions,
        target,
        layers: list[int],
        num_hidden_layers: int,
        max_model_len: int,
        workdir: str | os.PathLike[str],
        devices: str | None = None,
    ) -> None:
        self.layers, self.num_hidden_layers = list(layers), num_hidden_layers
        self.max_model_len = options.max_model_len or max(max_model_len, 16)
        self.norm_weight, self.eps = final_norm(target.require_path())
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "worker.log"
        self.devices = devices  # CUDA_VISIBLE_DEVICES of the worker (online training keeps it off the trainer's)
        self.proc = self._start(options, target)
        self.startup_s = self._await_ready()

    def _start(self, options: VllmOptions, target) -> subprocess.Popen:
        python = vllm_python(options.python)
        max_len = self.max_model_len
        command = [
            str(python),
            str(SIDE / "eagle3_extract_worker.py"),
            "--model",
            target.require_path(),
            "--layers",
            ",".join(map(str, [*self.layers, self.num_hidden_layers])),
            "--states-dir",
            str(self.workdir / "states"),
            "--max-model-len",
            str(max_len),
            "--tensor-parallel-size",
            str(options.tensor_parallel_size),
        ]
        if options.kv_cache_bytes:
            command += ["--kv-cache-bytes", str(options.kv_cache_bytes)]
        if target.trust_remote_code:
            command.append("--trust-remote-code")
        single = one_process(server_device("auto"), ranks=options.tensor_parallel_size)
        if single:  # the model in this worker's own process (serve/one_process.py): two vLLM starts fewer
            command.append("--one-process")
        env = {
            **os.environ,
            "PYTHONPATH": str(SIDE),
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
        }
        if self.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.devices
        if single:
            env.update(ENGINE_IN_PROCESS)
        log = open(self.log_path, "wb")
        return start_engine(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, text=True)

    def _await_ready(self) -> float:
        reply = self._read()
        return float(reply["startup_s"])

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise StageError(
                f"the vLLM worker stopped (exit {self.proc.returncode}):\n{self._log_tail()}",
                fix="read the vLLM log above; on CPU check the KV cache size (extract.vllm_kv_cache_bytes) and that the head size is 32 or more",
            )
        return json.loads(line)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def plan(self, lengths: list[int]) -> list[Batch]:
        """One request list per shard: vLLM schedules it and computes no padding."""
        members = tuple(i for i, n in enumerate(lengths) if n > 0)
        if not members:
            return []
        return [Batch(members, max(lengths[i] for i in members), sum(lengths[i] for i in members), padded=False)]

    def forward(self, batch_ids: list[list[int]]) -> list[tuple["torch.Tensor", "torch.Tensor"]]:
        self.proc.stdin.write(json.dumps({"prompts": batch_ids}) + "\n")
        self.proc.stdin.flush()
        paths = self._read()["paths"]
        return [self._load(path, ids) for path, ids in zip(paths, batch_ids, strict=True)]

    def _load(self, path: str | None, ids: list[int]) -> tuple["torch.Tensor", "torch.Tensor"]:
        import torch
        from safetensors.torch import load_file

        if path is None:
            raise StageError("vLLM returned no hidden-states file for a request", fix=f"see {self.log_path}")
        lock = path + ".lock"
        if os.path.exists(lock):
            with open(lock) as fh:
                fcntl.flock(fh, fcntl.LOCK_SH)  # the writer holds LOCK_EX until the file is complete
                data = load_file(path)
        else:
            data = load_file(path)
        for leftover in (path, lock):
            Path(leftover).unlink(missing_ok=True)
        states, token_ids = data["hidden_states"], data["token_ids"]
        if token_ids.tolist() != ids or states.shape[:2] != (len(ids), len(self.layers) + 1):
            raise StageError(
                f"vLLM dumped {tuple(states.shape)} states for ids that differ from the prompt",
                fix="prefix caching and chunked prefill must be off (the worker sets both)",
            )
        final = apply_rms_norm(states[:, -1], self.norm_weight, self.eps)
        return states[:, :-1].to(torch.bfloat16), final.to(torch.bfloat16)

    def close(self) -> None:
        """Ask the worker to quit; SIGTERM then SIGKILL its process group if it lingers."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
                self.proc.stdin.close()
            except OSError:
                pass
            for sig, grace in ((None, 20), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.proc.pid, sig)
                try:
                    self.proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        shutil.rmtree(self.workdir / "states", ignore_errors=True)  # the log stays with the run
