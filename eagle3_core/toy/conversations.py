"""Multi-turn inputs from the toy's single questions, for ``generate.turns`` tests and benchmarks.

A row is ``turns`` consecutive questions of ``prompts_train.jsonl`` as user turns, every one but
the last answered by "another model" (a fixed sentence): ``turns: last`` regenerates only the
final answer on that foreign history, ``turns: all`` every answer on the target's own.
"""

from __future__ import annotations

import json
from pathlib import Path

FOREIGN_ANSWER = "Another model answered this."


def toy_conversations(prompts_file: Path, count: int, turns: int) -> list[dict]:
    """``count`` rows of ``turns`` questions each (the file must hold ``count * turns`` of them)."""
    lines = Path(prompts_file).read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["messages"][0]["content"] for line in lines[: count * turns]]
    rows = []
    for i in range(count):
        messages: list[dict] = []
        for t, question in enumerate(questions[i * turns : (i + 1) * turns]):
            if t:
                messages.append({"role": "assistant", "content": FOREIGN_ANSWER})
            messages.append({"role": "user", "content": question})
        rows.append({"messages": messages})
    return rows
