"""Acceptance by context length: greedy speculative decoding replayed on the target's own answers.

One target forward over prompt + answer gives every position's auxiliary states; one drafter
unroll of K steps over the same positions (the training-time test, blocked attention, linear in
T) gives at each position i the chain of drafts the drafter would make there. Under greedy
verification a draft is kept only while every earlier one was, that is while the chain's inputs
*are* the answer's tokens, so the drafts accepted at i are exactly the leading steps whose
top token equals the answer's next tokens (``match_runs``): no decode loop, one pass per answer.

Walking the answer as vLLM does (``replay``: a round when n tokens are known drafts from position
n - 2; it keeps a tokens and the target adds one, so the next round has n + a + 1) gives the
rounds vLLM would run at each k, and each round counts in the bucket of its context length n
(prompt included). Totals over all buckets are vLLM's ``1 + accepted / drafts``; the report sets
them beside vLLM's own counters for the same answers.

Cost: per answer one target forward and one drafter unroll of max(k) steps; the drafter's logits
are made ``CHUNK`` positions at a time, so a 32K-token answer never holds (T, V_d) logits. It runs
where the offline loop's ``ChainDecoder`` was loaded (a GPU when there is one), on prompt ids rendered
as the server renders them (``offline.offline_prompt_ids``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3_core.stages.evaluate.metrics import SpecCounters

# Positions whose draft logits are made at once: (CHUNK, V_d) fp32 is 128 MiB at V_d = 32K.
CHUNK = 1024


@dataclass
class ContextCounters:
    """Per bucket, the counters of the rounds whose context length fell in it."""

    edges: list[int]
    buckets: list[SpecCounters] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.buckets = self.buckets or [SpecCounters() for _ in range(len(self.edges) + 1)]

    def record(self, context: int, proposed: int, accepted: int) -> None:
        index = sum(context >= edge for edge in self.edges)  # bucket i holds [edges[i-1], edges[i])
        self.buckets[index].record_step(proposed, accepted)

    def total(self) -> SpecCounters:
        whole = SpecCounters()
        for bucket in self.buckets:
            whole.drafts += bucket.drafts
            whole.draft_tokens += bucket.draft_tokens
            whole.accepted += bucket.accepted
            for pos, n in bucket.accepted_per_pos.items():
                whole.accepted_per_pos[pos] = whole.accepted_per_pos.get(pos, 0.0) + n
        return whole


def match_runs(drafter, target, aux_ids: list[int], ids: list[int], steps: int) -> list[int]:
    """Per position i of ``ids``: how many of the drafter's chained drafts from i equal ids[i+2:]."""
    import torch

    seq = torch.tensor([ids], device=drafter.fc.weight.device)  # the target's device (ChainDecoder.load)
    with torch.no_grad():
        states = target(seq, output_hidden_states=True).hidden_states
        dtype = drafter.fc.weight.dtype  # fp32; the target's states are bf16 on a GPU
        aux = torch.stack([states[k].to(seq.device) for k in aux_ids], dim=2).to(dtype)  # (1, T, 3, H)
        if hasattr(drafter, "block_predictions"):  # a block kind: the block anchored at i+1 drafts i+2..
            hits = drafter.block_predictions(seq, aux, steps)  # (K, T) target ids
        else:
            hits = _chain_predictions(drafter, seq, aux, steps)
    T = len(ids)
    truth = torch.full((steps, T), -1, dtype=torch.long, device=seq.device)
    for k in range(steps):
        truth[k, : max(T - 2 - k, 0)] = seq[0, 2 + k :]  # step k at i predicts i+2+k
    right = (hits == truth).long()  # (K, T)
    return right.cumprod(dim=0).sum(dim=0).tolist()  # leading run of kept drafts


def _chain_predictions(drafter, seq, aux, steps: int):
    """(K, T): EAGLE-3's chained drafts from each position (the training-time-test unroll)."""
    import torch

    shifted = torch.nn.functional.pad(seq[:, 1:], (0, 1))  # the token at i+1
    outputs = drafter.unroll(shifted, aux, steps)  # K x (1, T, H)
    return torch.stack([_predicted(drafter, out) for out in outputs])


def _predicted(drafter, out):
    import torch

    chunks = [drafter.logits(out[:, s : s + CHUNK]).argmax(-1) for s in range(0, out.shape[1], CHUNK)]
    return drafter.to_target_ids(torch.cat(chunks, dim=1))[0]  # (T,)


def replay(runs: list[int], prompt_len: int, end: int, k: int, counters: ContextCounters) -> None:
    """The rounds vLLM runs at k until ``end`` tokens are known: prefill gives one token, then each
    round drafts k from position known - 2 and keeps its leading run (``runs`` never counts a
    draft past the tokens it was matched against)."""
    known = prompt_len + 1
    while known < end:
        accepted = min(runs[known - 2], k)
        counters.record(known, k, accepted)
        known += accepted + 1


def measure_by_context(decoder, prompts: list[list[int]], answers: list[list[int] | None], edges, ks) -> dict:
    """ContextCounters per k, over the (prompt, answer) pairs; None answers (failed requests) skipped."""
    by_k = {k: ContextCounters(list(edges)) for k in ks}
    for prompt, answer in zip(prompts, answers):
        if not answer:
            continue
        ids = list(prompt) + list(answer)
        runs = match_runs(decoder.drafter, decoder.target, decoder.aux_ids, ids, max(ks))
        for k, counters in by_k.items():
            replay(runs, len(prompt), len(ids), k, counters)
    return by_k


def bucket_labels(edges: list[int]) -> list[str]:
    """'0-512', '512-2K', ..., '8K+': each bucket's range, in tokens of context."""
    names = [_short(e) for e in [0, *edges]]
    return [f"{a}-{b}" for a, b in zip(names, names[1:])] + [f"{names[-1]}+"]


def _short(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def context_block(by_k: dict[int, ContextCounters], k: int, source: str) -> dict:
    """The ``by_context`` block of report.json: every bucket that holds a round, per k."""
    counters = by_k[k]
    labels = bucket_labels(counters.edges)
    bounds = [0, *counters.edges, None]
    buckets = []
    for i, bucket in enumerate(counters.buckets):
        if not bucket.drafts and i == len(counters.buckets) - 1:
            continue  # "beyond" only when an answer reaches it
        buckets.append(
            {
                "label": labels[i],
                "from": bounds[i],
                "to": bounds[i + 1],
                **bucket.summary(k),
                "acceptance_length_by_k": {str(kk): by_k[kk].buckets[i].acceptance_length for kk in sorted(by_k)},
            }
        )
    return {"k": k, "edges": counters.edges, "source": source, "buckets": buckets, "total": counters.total().summary(k)}


def context_report(cfg, decoder, prompt_ids: list, answers: list, online: dict | None, source: str) -> dict:
    """Replay ``answers`` (target ids per prompt, None where a request failed) after ``prompt_ids`` (each
    prompt as the server rendered it, None where unknown) at every k of the sweep, with ``decoder`` (a loaded
    ``ChainDecoder``); the evaluated k's total beside vLLM's own acceptance length on the same answers."""
    kept = [(p, a) for p, a in zip(prompt_ids, answers) if p and isinstance(a, list) and a]
    ks = sorted(set(cfg.k_sweep) | {cfg.num_speculative_tokens})
    by_k = measure_by_context(decoder, [p for p, _ in kept], [a for _, a in kept], cfg.context_buckets, ks)
    block = {**context_block(by_k, cfg.num_speculative_tokens, source), "answers": len(kept)}
    vllm = ((online or {}).get("with_drafter") or {}).get("acceptance_length")
    total = block["total"]["acceptance_length"]
    block["vllm_acceptance_length"] = vllm
    block["difference_from_vllm"] = total - vllm if vllm is not None and total is not None else None
    return block
