"""The trainer process: ``python -m eagle3_core.stages.train.main --spec drafter/run_spec.json``.

Started by ``launcher`` as one process (CPU with gloo, or one GPU) or under the ``deepspeed``
launcher across GPUs and nodes. It reads the spec that ``run_train`` wrote (the train config
and the validated inputs), trains, and on rank 0 writes ``summary.json``. A user's mistake
exits 2 with ``error.json`` holding the ``Eagle3Error`` (type, message, fix, file) so the
caller can raise the same error; a crash exits 1 with the exception in ``error.json``. The same
record goes on one stdout line first (``ERROR_PREFIX``): on a full disk it is all that gets out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from pathlib import Path

from eagle3_core.ports import free_port

SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.json"
SPEC_FILE = "run_spec.json"
ERROR_PREFIX = "eagle3 train error: "  # then the error record as JSON, on one stdout line


def setup_environment() -> None:
    """One-process defaults for torch.distributed; the deepspeed launcher sets its own."""
    import torch

    os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(free_port()))


def error_record(exc: BaseException) -> dict:
    from eagle3_core.errors import Eagle3Error

    if isinstance(exc, Eagle3Error):
        return {
            "type": type(exc).__name__,
            "message": exc.message,
            "fix": exc.fix,
            "path": exc.path,
            "sample_id": exc.sample_id,
        }
    return {
        "type": "crash",
        "message": f"{type(exc).__name__}: {exc}",
        "traceback": traceback.format_exc()[-4000:],
    }


def write_error(out_dir: Path, exc: BaseException) -> None:
    """The error for the caller (rank 0): one ``ERROR_PREFIX`` line on stdout, then ``error.json``.
    The line is the record where the file cannot be written (a full disk)."""
    from eagle3_core.run.fsio import write_json_atomic

    if int(os.environ.get("RANK", 0)) != 0:
        return
    record = error_record(exc)
    print(ERROR_PREFIX + json.dumps(record), flush=True)
    with contextlib.suppress(Exception):  # on a full disk the file may not fit: the line has it
        write_json_atomic(out_dir / ERROR_FILE, record)


def run(spec_file: Path) -> dict:
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.inputs import TrainInputs
    from eagle3_core.stages.train.startup import import_deepspeed, skip_unused_compilers

    spec = json.loads(spec_file.read_text(encoding="utf-8"))
    cfg, inputs = TrainConfig.model_validate(spec["cfg"]), TrainInputs(**spec["inputs"])
    setup_environment()
    skip_unused_compilers(cfg)
    deepspeed = import_deepspeed()
    import torch

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    deepspeed.init_distributed(dist_backend=backend)
    from eagle3_core.stages.train.loop import Trainer

    return Trainer(cfg, inputs, spec["out_dir"], spec.get("facts")).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # deepspeed launcher
    args = parser.parse_args(argv)
    out_dir = args.spec.parent
    from eagle3_core.errors import Eagle3Error
    from eagle3_core.run.fsio import no_space_as_error, write_json_atomic

    try:
        with no_space_as_error(out_dir):  # a checkpoint on a full disk: one error naming drafter/
            summary = run(args.spec)
    except Eagle3Error as exc:
        write_error(out_dir, exc)
        return 2
    except Exception as exc:  # noqa: BLE001 - report any crash to the caller, then fail
        write_error(out_dir, exc)
        traceback.print_exc()
        return 1
    if int(os.environ.get("RANK", 0)) == 0:
        write_json_atomic(out_dir / SUMMARY_FILE, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
