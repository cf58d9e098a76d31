"""Held-out prompts for evaluation, and the proof that none of them was trained on.

Prompts are read and normalised by the code generate reads them with (``iter_rows``, ``normalize``),
so a row means the same thing here as it did when the training set was generated. The overlap
check compares *prompt keys*: a stable hash of the normalised prompt messages alone. A
generation's ``sample_id`` also hashes the sampling settings, so two runs of one prompt at two
temperatures differ there; the prompt key catches them both.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_core.base import stable_hash
from eagle3_core.errors import InputError
from eagle3_core.prompts.source import PromptSource

Messages = list[dict[str, str]]


def prompt_key(messages: Messages) -> str:
    """The sample key of a prompt: its role/content messages, nothing else."""
    return stable_hash([{"role": m["role"], "content": m["content"]} for m in messages], length=24)


def load_heldout(source: PromptSource) -> tuple[list[Messages], int]:
    """The usable prompts of ``source`` (input order) and how many rows were not usable."""
    from eagle3_core.chat.rows import RowRejection, normalize
    from eagle3_core.prompts.inputs import iter_rows

    prompts, skipped = [], 0
    for row in iter_rows(source):
        messages = normalize(row)
        if isinstance(messages, RowRejection):
            skipped += 1
        else:
            prompts.append(messages)
    if not prompts:
        raise InputError(
            f"no usable held-out prompts in {source.input} ({skipped} rows rejected)",
            fix="pass rows with `messages`, `conversations` or `prompt`",
        )
    return prompts, skipped


def training_prompt_keys(generations_dir: str | Path) -> set[str]:
    """Prompt keys of every accepted generation (the prompts the drafter was trained on)."""
    from eagle3_core.contracts import generations

    try:
        files = generations.accepted_parts(generations_dir)
    except InputError as exc:
        raise InputError(
            "no accepted generations to check the held-out prompts against",
            path=exc.path,
            fix="pass the generations/ folder the drafter was trained on",
        ) from None
    keys = set()
    for file in files:
        for messages in generations.read(file, ["messages"]).column("messages").to_pylist():
            keys.add(prompt_key(messages))
    return keys


def check_no_overlap(prompts: list[Messages], generations_dir: str | Path) -> int:
    """Refuse held-out prompts that were trained on; returns how many training prompts were compared."""
    trained = training_prompt_keys(generations_dir)
    overlap = [i for i, messages in enumerate(prompts) if prompt_key(messages) in trained]
    if overlap:
        first = prompts[overlap[0]][-1]["content"][:80]
        raise InputError(
            f"{len(overlap)} of {len(prompts)} held-out prompts are training prompts "
            f"(first, row {overlap[0]}: {first!r})",
            path=str(generations_dir),
            sample_id=prompt_key(prompts[overlap[0]]),
            fix="evaluate on prompts the drafter never saw (e.g. the toy target's held-out set)",
        )
    return len(trained)
