"""Proof that drafting changed no output: the two arms of the online measurement compared.

Speculative decoding is lossless by construction: with greedy decoding the target's output must be
the same token for token whether a drafter proposes or not, and with sampling its distribution must
be. A speed report alone cannot show it (a drafter that shortens reasoning traces reads as faster),
so evaluate compares the arms it already runs, with no extra pass:

- **greedy** (temperature 0): every prompt's output ids with the drafter against without it; the
  share identical, and for each that is not, where the two first part. vLLM batches the two arms
  differently (a verify step scores k + 1 positions at once), so a near-tie between two tokens can
  fall the other way in the last ulp: a few differing prompts are numerics, a drafter that
  changes outputs differs on most;
- **sampled**: outputs cannot match, so the two arms' output lengths are compared (mean, p50, p90)
  with a two-sample Kolmogorov-Smirnov test: a drafter that shortens answers shows a small p-value.

Each arm's outputs are also hashed (SHA-256 of the ids in prompt order), so two evaluations of the
same target and prompts can be compared without their files.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics

SHOWN = 8  # differing prompts listed in the report; the count covers all of them
Output = list[int] | str | None  # token ids (text where the server gave none); None: the request failed


def output_hash(outputs: list[Output]) -> str | None:
    """SHA-256 of the outputs in prompt order (a failed request hashes as null); None without outputs."""
    if not outputs:
        return None
    return hashlib.sha256(json.dumps(outputs, separators=(",", ":")).encode()).hexdigest()


def first_difference(a: list[int] | str, b: list[int] | str) -> int:
    """The first position where the two outputs part (the shorter one's length when it is a prefix)."""
    for position, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return position
    return min(len(a), len(b))


def _at(output: list[int] | str, position: int) -> int | str | None:
    return output[position] if position < len(output) else None  # None: that output had ended


def greedy_comparison(with_drafter: list[Output], without: list[Output]) -> dict:
    """Each prompt answered by both arms: identical or where the two first part."""
    pairs = [(i, a, b) for i, (a, b) in enumerate(zip(with_drafter, without)) if a is not None and b is not None]
    differing = []
    for prompt, a, b in pairs:
        if a != b:
            at = first_difference(a, b)
            differing.append(
                {"prompt": prompt, "position": at, "with_drafter": _at(a, at), "without_drafter": _at(b, at)}
            )
    return {
        "compared": len(pairs),
        "identical": len(pairs) - len(differing),
        "identical_share": (len(pairs) - len(differing)) / len(pairs) if pairs else None,
        "differing": len(differing),
        "first_differences": differing[:SHOWN],
        "unit": "characters" if any(isinstance(a, str) for _, a, _ in pairs) else "tokens",
    }


def length_summary(lengths: list[int]) -> dict:
    from eagle3_core.stages.evaluate.per_request import percentile  # the report's one percentile rule

    ordered = sorted(lengths)
    return {
        "outputs": len(ordered),
        "mean": statistics.fmean(ordered),
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
    }


def ks_two_sample(a: list[float], b: list[float]) -> dict:
    """Kolmogorov-Smirnov two-sample test: the largest gap between the two empirical distributions, and its
    asymptotic p-value (Numerical Recipes' ``probks`` with Stephens' small-sample correction)."""
    xs, ys = sorted(a), sorted(b)
    gap, i, j = 0.0, 0, 0
    while i < len(xs) and j < len(ys):
        step = min(xs[i], ys[j])
        while i < len(xs) and xs[i] == step:
            i += 1
        while j < len(ys) and ys[j] == step:
            j += 1
        gap = max(gap, abs(i / len(xs) - j / len(ys)))
    effective = math.sqrt(len(xs) * len(ys) / (len(xs) + len(ys)))
    lam = (effective + 0.12 + 0.11 / effective) * gap
    return {"statistic": gap, "p_value": _kolmogorov_tail(lam)}


def _kolmogorov_tail(lam: float) -> float:
    """P(K > lam) for Kolmogorov's distribution: 2 sum_j (-1)^(j-1) exp(-2 j^2 lam^2)."""
    if lam < 1e-3:
        return 1.0
    total = sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return min(1.0, max(0.0, 2 * total))


def sampled_comparison(with_drafter: list[Output], without: list[Output]) -> dict:
    """The two arms' output lengths side by side, and whether they could come from one distribution."""
    ours, theirs = ([len(o) for o in outputs if o is not None] for outputs in (with_drafter, without))
    if not ours or not theirs:
        return {"lengths": None, "ks": None}
    return {
        "lengths": {"with_drafter": length_summary(ours), "without_drafter": length_summary(theirs)},
        "ks": ks_two_sample(ours, theirs),
    }


def lossless_block(with_drafter: list[Output], without: list[Output] | None, temperature: float) -> dict:
    """report.json's ``lossless``: each arm's hash, and the comparison where both arms ran."""
    block = {
        "decoding": "greedy" if temperature == 0 else "sampled",
        "output_hash": {"with_drafter": output_hash(with_drafter), "without_drafter": output_hash(without or [])},
        "greedy": None,
        "sampled": None,
        "not_compared": None,
    }
    if without is None:
        block["not_compared"] = (
            "no baseline server ran (evaluate.baseline: false): only the drafter's outputs are hashed"
        )
    elif temperature == 0:
        block["greedy"] = greedy_comparison(with_drafter, without)
    else:
        block["sampled"] = sampled_comparison(with_drafter, without)
    return {**block, "line": lossless_line(block)}  # the sentence report.md and the model card show


def lossless_line(block: dict | None) -> str | None:
    """One sentence for report.md and the model card."""
    if not block:
        return None
    if block["not_compared"]:
        return f"Lossless: not compared ({block['not_compared']})."
    if block["greedy"]:
        g = block["greedy"]
        if not g["compared"]:
            return "Lossless: no prompt was answered by both arms."
        where = ", ".join(f"prompt {d['prompt']} at {g['unit'][:-1]} {d['position']}" for d in g["first_differences"])
        return (
            f"Lossless (greedy): {g['identical']} of {g['compared']} outputs identical with and without the drafter"
            + (f"; first differences: {where}." if where else ".")
        )
    s = block["sampled"]
    if not s or not s["lengths"]:
        return "Lossless (sampled): no output lengths to compare."
    a, b = s["lengths"]["with_drafter"], s["lengths"]["without_drafter"]
    return (
        f"Lossless (sampled): output length mean {a['mean']:.1f} / p50 {a['p50']:.1f} / p90 {a['p90']:.1f} with the "
        f"drafter, {b['mean']:.1f} / {b['p50']:.1f} / {b['p90']:.1f} without; Kolmogorov-Smirnov p = {s['ks']['p_value']:.3g}."
    )
