"""The reconstruct stage's own artifact: the server-id check (match rate plus the first differing
position of each mismatch) as a table, so a template that drifted from the server's is seen
in the UI, not discovered after training.
"""

from __future__ import annotations

from eagle3_core.contracts.details import ReconstructDetails
from eagle3_core.run.manifest import StageManifest
from tasks.common import publish_table


def publish(stage, manifest: StageManifest) -> None:
    publish_server_check(manifest)
    publish_rejects(manifest)


def publish_rejects(manifest: StageManifest) -> None:
    """A table artifact: rows per source (server ids or text) and rejects per reason (the text path's
    own reasons among them, docs/stages/reconstruct.md, "The token rules")."""
    rows = [
        {"group": "source", "name": k.removeprefix("source_"), "value": v}
        for k, v in manifest.counts.items()
        if k.startswith("source_")
    ]
    rows += [
        {"group": "unchecked", "name": k.removeprefix("unchecked_"), "value": v}
        for k, v in manifest.counts.items()
        if k.startswith("unchecked_")
    ]
    rows += [
        {"group": "reject_reasons", "name": k, "value": v}
        for k, v in (ReconstructDetails.of(manifest).reject_reasons or {}).items()
    ]
    publish_table(rows, key="reconstruct-rejects", description="reconstruct: sequences per source, rejects per reason")


def publish_server_check(manifest: StageManifest) -> None:
    """A table artifact: the match rate, then one row per mismatch (first 100)."""
    details = ReconstructDetails.of(manifest)
    check = details.server_check or {}
    rows = [
        {
            "sample_id": "(all)",
            "first_diff": None,
            "where": None,
            "match_rate": check.get("match_rate"),
            "checked": check.get("checked"),
            "matched": check.get("matched"),
        }
    ]
    rows += [
        {
            "sample_id": m["sample_id"],
            "first_diff": m["first_diff"],
            "where": m["where"],
            "rebuilt_near": str(m["rebuilt_near"]),
            "server_near": str(m["server_near"]),
        }
        for m in details.mismatches
    ]
    publish_table(
        rows,
        key="reconstruct-server-check",
        # the warning (under 99%) is the line to see in the UI: the recipe is likely not the server's
        description=f"rebuilt vs server token ids: match rate {check.get('match_rate')}"
        + (f"; {check['warning']}" if check.get("warning") else ""),
    )
