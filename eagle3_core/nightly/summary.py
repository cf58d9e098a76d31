"""What the nightly's own run page shows: the version it wrote and what went into it.

A nightly run's page had no artifact ("This run did not produce any artifacts"), so nothing there
said which dataset version it wrote, which model the endpoints served, how many prompts were new
or reused, which versions were pruned, or whether a drafter was trained. ``nightly_facts`` reads
them back from the files the run wrote (the version's generations manifest, the dataset root, the
drafter's train manifest); ``nightly_markdown`` is the ``nightly-summary`` artifact. No figure is
computed here beyond a difference of two counts (new = asked tonight).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_core.contracts.details import GenerateDetails, TrainDetails
from eagle3_core.nightly import versions as dv
from eagle3_core.run.manifest import read_manifest


def nightly_facts(
    root: str | Path, version: str, model: str | None, deleted: list[str], drafter: Path | None
) -> dict[str, Any]:
    """The facts of one nightly run, from what it left under ``root``."""
    generations = read_manifest(dv.versions_dir(root) / version / "generations")
    counts = dict(generations.counts) if generations is not None else {}
    reused = counts.get("resumed", 0)
    facts: dict[str, Any] = {
        "version": version,
        "served_model": model,
        "prompts": {
            "input": counts.get("input"),
            "new": None if not counts else counts.get("input", 0) - reused - counts.get("skipped", 0),
            "reused": reused,
            "accepted": counts.get("accepted"),
            "rejected": counts.get("rejected"),
            "open": counts.get("open"),
            "requests": counts.get("requests"),
        },
        "reject_reasons": (GenerateDetails.of(generations).reject_reasons if generations is not None else None) or {},
        "versions_kept": dv.complete_versions(root),
        "versions_pruned": list(deleted),
        "drafter": None,
    }
    if drafter is not None:
        trained = read_manifest(drafter)
        details = TrainDetails.of(trained) if trained is not None else TrainDetails()
        facts["drafter"] = {
            "folder": str(drafter),
            "steps": trained.counts.get("steps") if trained is not None else None,
            "heldout_sim_acceptance_length": details.sim_acceptance_length_final,
        }
    return facts


def nightly_markdown(facts: dict[str, Any]) -> str:
    p = facts["prompts"]
    rows = [
        ("dataset version written", f"`{facts['version']}`"),
        ("served model", facts["served_model"]),
        ("prompts in the input", p["input"]),
        ("new tonight (asked)", p["new"]),
        ("reused from the previous version", p["reused"]),
        ("accepted / rejected / open", f"{_show(p['accepted'])} / {_show(p['rejected'])} / {_show(p['open'])}"),
        ("requests sent", p["requests"]),
        ("reject reasons", ", ".join(f"{r}: {n}" for r, n in facts["reject_reasons"].items()) or "none"),
        ("versions kept", ", ".join(facts["versions_kept"]) or "none"),
        ("versions pruned", ", ".join(facts["versions_pruned"]) or "none"),
    ]
    drafter = facts["drafter"]
    if drafter is None:
        rows.append(("drafter", "not trained (nightly train: false)"))
    else:
        rows += [
            ("drafter", f"`{drafter['folder']}` ({_show(drafter['steps'])} steps)"),
            ("held-out simulated acceptance length", drafter["heldout_sim_acceptance_length"]),
        ]
    table = ["| | |", "|---|---|", *(f"| {name} | {_show(value)} |" for name, value in rows)]
    return "\n".join([f"# eagle3 nightly: version `{facts['version']}`", "", *table])


def _show(value: Any) -> str:
    return "-" if value is None else str(value)
