"""Start the trainer process and stream its output.

One process (``python -m eagle3_core.stages.train.main``) on CPU or one GPU; the ``deepspeed``
launcher (``--num_gpus``, ``--hostfile``) across GPUs and nodes. Every output line goes to
``drafter/train.log``; ``METRICS`` lines become the reporter's progress, the rest its log.
The last lines are kept so a failure can quote the trainer's own words. On a CPU, a lock left by a
killed build of DeepSpeed's op is cleared first (``build_lock.py``), or the trainer would wait on it.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_core.errors import ConfigError
from eagle3_core.run.progress import Reporter
from eagle3_core.stages.train.build_lock import clear_stale_build_lock
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.main import ERROR_PREFIX
from eagle3_core.stages.train.metrics import PREFIX

LOG_FILE = "train.log"
TAIL_LINES = 40
# Lines of DeepSpeed's start-up chatter that say nothing to a user of eagle3.
QUIET = (
    "[INFO]",
    "Using /",
    "Emitting ninja",
    "Building extension",
    "Loading extension",
    "ninja: no work",
    " INFO mlflow.",  # MLflow creating its local store's tables
)


@dataclass
class TrainerExit:
    """How the trainer process ended: its exit code and its last output lines (``TAIL_LINES``)."""

    returncode: int
    tail: list[str] = field(default_factory=list)


def deepspeed_launcher() -> str:
    """The ``deepspeed`` script of the environment running eagle3 (beside its Python), else PATH's.

    A venv's ``bin/`` is often not on PATH (``.venv/bin/eagle3 train ...``), and a launcher from
    another environment would start ranks with another Python.
    """
    beside = Path(sys.executable).parent / "deepspeed"
    if beside.exists():
        return str(beside)
    found = shutil.which("deepspeed")
    if found is None:
        raise ConfigError(
            f"no deepspeed launcher beside {sys.executable} nor on PATH (train.num_gpus / train.hostfile need it)",
            fix="install deepspeed into this environment "
            "(pip install deepspeed), or train in one process without --num-gpus/--hostfile",
        )
    return found


def trainer_command(cfg: TrainConfig, spec_file: Path) -> list[str]:
    if cfg.num_gpus is None and cfg.hostfile is None:
        return [sys.executable, "-m", "eagle3_core.stages.train.main", "--spec", str(spec_file)]
    command = [deepspeed_launcher()]
    if cfg.hostfile:
        command += ["--hostfile", cfg.hostfile]
    if train_devices(cfg) and not cfg.hostfile:  # the engine's GPUs stay the engine's
        command += ["--include", f"localhost:{train_devices(cfg)}"]
    elif cfg.num_gpus:
        command += ["--num_gpus", str(cfg.num_gpus)]
    return command + ["--module", "eagle3_core.stages.train.main", "--spec", str(spec_file)]


def train_devices(cfg: TrainConfig) -> str | None:
    from eagle3_core.stages.train.hidden_sources import source_for

    return source_for(cfg.mode).train_devices(cfg)


def trainer_env(cfg: TrainConfig) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if train_devices(cfg) and cfg.num_gpus is None and cfg.hostfile is None:
        env["CUDA_VISIBLE_DEVICES"] = train_devices(cfg)
    if cfg.master_port is not None:
        env["MASTER_PORT"] = str(cfg.master_port)
    return env


def handle_line(line: str, reporter: Reporter) -> None:
    if line.startswith(PREFIX):
        record = json.loads(line[len(PREFIX) :])
        if record.get("split") == "heldout":
            reporter.log(
                f"held-out ({record['name']}, step {record['step']}): simulated acceptance length "
                f"{record['sim_acceptance_length']:.3f}, acc {record['acc_k']}"
            )
        else:
            reporter.progress(
                "train",
                record["step"],
                record.get("total_steps"),
                loss=record["loss"],
                acc0=record["acc_k"][0],
                tokens_per_s=record["tokens_per_s"],
            )
    elif line.strip() and ERROR_PREFIX not in line and not any(q in line for q in QUIET):  # the caller raises it
        reporter.log(line)


def launch(cfg: TrainConfig, spec_file: Path, reporter: Reporter) -> TrainerExit:
    """Run the trainer to its end; its exit code and last lines."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    log = spec_file.parent / LOG_FILE
    note = clear_stale_build_lock()  # a killed build's lock would hold the trainer silently forever
    with (
        open(log, "a", encoding="utf-8") as log_fh,
        subprocess.Popen(
            trainer_command(cfg, spec_file),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=trainer_env(cfg),
            bufsize=1,
        ) as proc,
    ):
        if note:  # in train.log too, flushed: that is where a user looks at a trainer that says nothing
            log_fh.write(note + "\n")
            log_fh.flush()
            reporter.log(note)
        try:
            for line in proc.stdout:
                log_fh.write(line)
                line = line.rstrip("\n")
                tail.append(line)
                handle_line(line, reporter)
        except BaseException:
            proc.kill()  # a cancelled caller must not leave a trainer behind
            raise
        returncode = proc.wait()
    return TrainerExit(returncode, list(tail))
