"""What hidden/ will cost on disk, said before the run, and a refusal when it cannot fit.

A token's bytes are the hidden contract's (``contracts.hidden.token_bytes``: 4·H·2 of states,
32 KiB at H = 4096, 56 KiB at Kimi-K2.5's H = 7168, plus 5 of ids and mask).
Below both stages that read it: extract says it before its run and refuses what cannot fit; train's
mode auto reads the same figure to choose offline or online, and online training its free space.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from eagle3_core.contracts.hidden import state_bytes_per_token, token_bytes
from eagle3_core.errors import StageError


def free_bytes(path: str | Path) -> int:
    """Free space of the filesystem that holds ``path`` (or its nearest existing parent)."""
    probe = Path(path).resolve()
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError("unreachable")


def storage_line(tokens_left: int, hidden_size: int, out_dir: str | Path) -> tuple[str, int, int]:
    """(message, bytes needed, bytes free) for the tokens still to write."""
    per_token = state_bytes_per_token(hidden_size)
    need = tokens_left * token_bytes(hidden_size)
    free = free_bytes(out_dir)
    line = (
        f"hidden states: {tokens_left:,} tokens x {human(per_token)} (4 x H={hidden_size} x bf16) "
        f"= {human(need)} to write; {human(free)} free at {Path(out_dir).resolve()}"
    )
    return line, need, free


def online_command(
    sequences_dir: str | Path, target_path: str, free: int, need: int, layers: list[int] | None = None
) -> str:
    """The command that trains without writing hidden/: states streamed from vLLM through a spool
    of at most half the free space (or the whole set, when that is smaller), on the layers given."""
    spool_gb = max(0.1, round(min(free / 2, need) / 2**30, 1))
    given = f" --layers {','.join(map(str, layers))}" if layers else ""
    return (
        f"eagle3 train --mode online-vllm --input {sequences_dir} --target {target_path} "
        f"--vocab VOCAB_DIR --out DRAFTER_DIR --spool-gb {spool_gb:g}{given}"
    )


def check_fits(need: int, free: int, headroom: float, out_dir: str | Path, online: str | None = None) -> None:
    """Refuse to start when hidden/ cannot fit; ``online`` is the command that needs no hidden/."""
    if need * headroom > free:
        raise StageError(
            f"hidden states need {human(need)} (x{headroom} headroom) but only {human(free)} is free",
            path=str(out_dir),
            fix="free disk space, write to a larger volume (--out), extract fewer samples, or train without "
            f"storing them (the recipe's train.mode: auto does it by itself): {online or 'eagle3 train --mode online-vllm'}",
        )
