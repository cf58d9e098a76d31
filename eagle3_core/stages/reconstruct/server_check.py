"""Rebuilt sequences against the server's own ids: the figure (``details.server_check``) and the
warning when too few match.

A rebuilt sequence equals the server's ids only when the recipe's tokenizer and chat template are
the server's. One that differs for a stray record (a repeated ``</think>`` the parser dropped from
the text, counted apart) is a note; more than 1 in 100 differing otherwise is a recipe that does
not describe the served model, and every sequence built from text (``prefer: text``, or a record
without ids) then trains on tokens the model never produced. The warning says so in one line,
and is kept in the manifest (``server_check.warning``) for the run summary.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

# Under it, more than 1 rebuilt sequence in 100 differs from the server's ids for no known reason:
# no stray record does that, a tokenizer or template that is not the server's does.
MATCH_FLOOR = 0.99


def server_check(counts: Counter, prefer: str) -> dict[str, Any]:
    """How many rebuilt sequences were checked against the server's ids, and matched; with
    ``warning`` when the explained share falls under ``MATCH_FLOOR``."""
    checked = counts.get("server_checked", 0)
    matched = counts.get("server_matched", 0)
    check = {"checked": checked, "matched": matched, "match_rate": round(matched / checked, 6) if checked else None}
    repeated = counts.get("server_repeated_think_close", 0)
    check |= {"repeated_think_close": repeated} if repeated else {}
    warning = match_warning(check, prefer, counts.get("source_text", 0))
    return check | ({"warning": warning} if warning else {})


def match_warning(check: dict[str, Any], prefer: str, text_rows: int) -> str | None:
    """One line naming the rate, what it means for training and the likely cause; None when the
    sequences match (or none was checked)."""
    checked = check["checked"]
    explained = check["matched"] + check.get("repeated_think_close", 0)
    if not checked or explained / checked >= MATCH_FLOOR:
        return None
    return (
        f"reconstruct: warning: only {check['match_rate']:.2%} of {checked} rebuilt sequences match the "
        f"server's token ids (under {MATCH_FLOOR:.0%}): {_meaning(prefer, text_rows)}; the likely cause is "
        "the recipe's tokenizer or chat template (--tokenizer, target.chat), which is not the server's "
        "(a server-side --chat-template among them): details.mismatches shows where they differ"
    )


def _meaning(prefer: str, text_rows: int) -> str:
    """What the differences do to training: every sequence built from text is suspect."""
    if prefer == "text":
        return "the tokens trained on (prefer: text) are not the ones the model produced"
    return (
        "training takes the server's ids where a record has them, but a sequence built from text "
        f"({text_rows} here: records without ids) holds tokens the model did not produce"
    )
