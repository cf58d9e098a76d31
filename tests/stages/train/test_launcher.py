"""How the trainer is started, and how its output becomes progress and log lines."""

import json
import sys
from pathlib import Path

import pytest

from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.launcher import handle_line, trainer_command


def test_one_process_runs_the_module_and_gpus_or_a_hostfile_use_the_deepspeed_launcher():
    spec = Path("/run/drafter/run_spec.json")
    assert trainer_command(TrainConfig(), spec)[1:] == ["-m", "eagle3_core.stages.train.main", "--spec", str(spec)]
    command = trainer_command(TrainConfig(num_gpus=8, hostfile="/etc/hosts.ds"), spec)
    assert command[0] == str(Path(sys.executable).parent / "deepspeed")  # beside this Python, not PATH's
    assert command[1:5] == ["--hostfile", "/etc/hosts.ds", "--num_gpus", "8"]
    assert command[5:] == ["--module", "eagle3_core.stages.train.main", "--spec", str(spec)]


class Recorder:
    def __init__(self):
        self.progress_calls, self.lines = [], []

    def progress(self, stage, done, total, **figures):
        self.progress_calls.append((stage, done, total, figures))

    def log(self, message):
        self.lines.append(message)


def test_metrics_lines_become_progress_and_heldout_lines_a_readable_log():
    r = Recorder()
    handle_line(
        "METRICS "
        + json.dumps(
            {"step": 3, "split": "train", "total_steps": 10, "loss": 1.5, "acc_k": [0.5, 0.4], "tokens_per_s": 900.0}
        ),
        r,
    )
    handle_line(
        "METRICS "
        + json.dumps(
            {"step": 0, "split": "heldout", "name": "initial", "sim_acceptance_length": 1.02, "acc_k": [0.01]}
        ),
        r,
    )
    handle_line("[2026-11-30 05:00:00] [INFO] [engine.py:1] DeepSpeed chatter", r)
    handle_line("a line from the trainer", r)
    assert r.progress_calls == [("train", 3, 10, {"loss": 1.5, "acc0": 0.5, "tokens_per_s": 900.0})]
    assert r.lines[0].startswith("held-out (initial, step 0): simulated acceptance length 1.020")
    assert r.lines[1:] == ["a line from the trainer"]


def test_the_launcher_is_found_beside_python_even_when_path_lacks_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert Path(trainer_command(TrainConfig(num_gpus=2), Path("s.json"))[0]).exists()


def test_no_launcher_anywhere_is_one_clear_error(monkeypatch, tmp_path):
    from eagle3_core.errors import ConfigError

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(ConfigError, match="no deepspeed launcher beside"):
        trainer_command(TrainConfig(num_gpus=2), Path("s.json"))


def test_torch_compile_is_off_in_a_trainer_only_where_nothing_in_its_run_compiles(tmp_path):
    """The trainer's start skips TorchInductor (built on import by DeepSpeed's Muon) where nothing compiles;
    flex attention compiles, and a user's DeepSpeed file may name Muon or a compile section."""
    from eagle3_core.stages.train.startup import skip_unused_compilers

    user_file = tmp_path / "ds.json"
    user_file.write_text("{}")
    cases = [(TrainConfig(), "1"), (TrainConfig(ttt_attention="flex"), None)]
    cases += [(TrainConfig(deepspeed_config=str(user_file)), None)]
    for cfg, expected in cases:
        environ: dict[str, str] = {}
        skip_unused_compilers(cfg, environ)
        assert environ.get("TORCHDYNAMO_DISABLE") == expected, cfg
    environ = {"TORCHDYNAMO_DISABLE": "0"}  # the user's own choice stands
    skip_unused_compilers(TrainConfig(), environ)
    assert environ == {"TORCHDYNAMO_DISABLE": "0"}
