"""Chain speculative decoding with transformers: the drafter judged without a server.

Greedy, one prompt at a time (batch 1), k draft tokens per step, the same bookkeeping as
vLLM (``SpecCounters``: a draft of k tokens per verification, accepted = the leading draft
tokens equal to the target's greedy choice, the bonus token not counted in ``accepted``).

Each round mirrors vLLM's EAGLE-3 proposer: the drafter reads the target's auxiliary states
for every verified position (step 0, shifted ids), then chains k-1 more tokens on its own
pre-norm hidden stream; the target verifies the drafts in one forward pass, whose auxiliary
states at the accepted positions are the next round's input. The
target and the drafter keep KV caches that are cropped back to the verified positions after
each verification, so a round costs k+1 target positions and k drafter positions (plus the
newly verified ones); still batch 1 and fp32: a large target belongs in vLLM, not here.

Auxiliary layer id k is transformers' ``output_hidden_states[k]`` (vLLM's counting).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_core.evaluate.metrics import SpecCounters
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.target import ChatSettings


@dataclass
class OfflineResult:
    """The counters of one k, and each prompt's greedy completion (target ids)."""

    k: int
    counters: SpecCounters = field(default_factory=SpecCounters)
    completions: list[list[int]] = field(default_factory=list)
    wall_s: float = 0.0


class ChainDecoder:
    """A target and a drafter, loaded once, decoding prompts greedily with k-token drafts."""

    def __init__(self, target, drafter, eos_ids: set[int]) -> None:
        """``target``: a transformers causal LM; ``drafter``: an ``Eagle3Drafter`` on the same device."""
        self.target, self.drafter, self.eos_ids = target, drafter, eos_ids
        self.aux_ids = list(drafter.config.aux_layer_ids)
        self.device = next(target.parameters()).device
        # transformers renamed ``past_key_values`` to ``cache`` (the old name goes in 5.40).
        self.cache_arg = "cache" if "cache" in inspect.signature(target.forward).parameters else "past_key_values"

    @classmethod
    def load(
        cls,
        target_path: str | Path,
        export_dir: str | Path,
        threads: int | None = None,
        trust_remote_code: bool = False,
    ) -> "ChainDecoder":
        """Target (fp32, CPU) and drafter from disk; the drafter shares the target's embedding."""
        import torch

        from eagle3_core.drafter.kinds import drafter_class, kind_of_export
        from eagle3_core.states.target_model import load_target_model

        if threads:
            torch.set_num_threads(threads)
        target = load_target_model(target_path, trust_remote_code, "cpu", torch.float32)
        embed = target.get_input_embeddings().weight.detach()
        model = drafter_class(kind_of_export(export_dir))  # a block kind drafts in one pass
        drafter = model.from_export(export_dir, embed_tokens=embed)
        return cls(target, drafter, eos_token_ids(target_path, target.config))

    def decode(self, prompt_ids: list[int], k: int, max_tokens: int, counters: SpecCounters) -> list[int]:
        """One prompt's greedy completion, recording each verification in ``counters``."""
        import torch

        with torch.inference_mode():
            return _Decoding(self, prompt_ids).run(k, max_tokens, counters)


class _Decoding:
    """One prompt's state: the sequence, the target's and drafter's caches, the verified aux states.

    Invariants between rounds (n = len(seq)): the target cache and ``aux`` cover positions
    0..n-2 (the last token, the target's own, is not yet through the target); the drafter cache
    holds step-0 entries (read from the target's states) for positions 0..len(drafter_cache)-1.
    """

    def __init__(self, d: ChainDecoder, prompt_ids: list[int]) -> None:
        from transformers import DynamicCache

        from eagle3_core.drafter.model import KVCache

        self.d, self.seq = d, list(prompt_ids)
        self.target_cache, self.drafter_cache = DynamicCache(), KVCache()
        self.aux = []  # (1, 3H) per verified position

    def _target(self, ids: list[int]) -> list[int]:
        """Greedy choices after each of ``ids`` (appended to the cache); their aux states appended."""
        import torch

        out = self.d.target(
            torch.tensor([ids], device=self.d.device),
            use_cache=True,
            output_hidden_states=True,
            **{self.d.cache_arg: self.target_cache},
        )
        aux = torch.cat([out.hidden_states[i][0] for i in self.d.aux_ids], dim=-1)  # (T, 3H)
        self.aux.extend(aux.split(1))
        return out.logits[0].argmax(-1).tolist()

    def _propose(self, k: int) -> list[int]:
        """k draft tokens after ``seq``: step 0 on the new verified positions, then a chain of k-1;
        a block drafter's k in one pass over every verified position's states."""
        import torch

        if hasattr(self.d.drafter, "propose"):  # a block kind (drafter/kinds.py): one block per round
            return self.d.drafter.propose(torch.cat(self.aux)[None], self.seq[-1], k)

        n, done = len(self.seq), len(self.drafter_cache)
        dev = self.d.device
        ids = torch.tensor([self.seq[done + 1 :]], device=dev)  # token i+1 at position i
        hidden = self.d.drafter.combine(torch.cat(self.aux[done : n - 1])[None])  # (1, T, H)
        out = self.d.drafter(ids, hidden, torch.arange(done, n - 1, device=dev)[None], cache=self.drafter_cache)
        drafts = []
        for step in range(k):
            token = int(self.d.drafter.to_target_ids(out.logits[0, -1].argmax()))
            drafts.append(token)
            if step + 1 < k:
                out = self.d.drafter(
                    torch.tensor([[token]], device=dev),
                    out.hidden[:, -1:],
                    torch.tensor([[n - 1 + step]], device=dev),
                    cache=self.drafter_cache,
                )
        self.drafter_cache.crop(n - 1)  # chain entries never persist
        return drafts

    def run(self, k: int, max_tokens: int, counters: SpecCounters) -> list[int]:
        first = self._target(self.seq)[-1]
        self.seq.append(first)
        completion = [first]
        while len(completion) < max_tokens and completion[-1] not in self.d.eos_ids:
            n = len(self.seq)
            drafts = self._propose(k)
            verdicts = self._target([self.seq[-1]] + drafts)  # target's choice after seq, d1..dk
            accepted = next((i for i, (d, t) in enumerate(zip(drafts, verdicts)) if d != t), k)
            counters.record_step(k, accepted)
            self._keep(n + accepted)  # verified: seq + d1..da
            new = _until_stop(drafts[:accepted] + [verdicts[accepted]], self.d.eos_ids, max_tokens - len(completion))
            self.seq += new
            completion += new
        return completion

    def _keep(self, length: int) -> None:
        """Drop the target's cache entries and aux states of rejected drafts."""
        remove = self.target_cache.get_seq_length() - length
        if remove > 0:
            self.target_cache.crop(-remove)  # negative: tokens to remove
        del self.aux[length:]


def _until_stop(tokens: list[int], eos_ids: set[int], room: int) -> list[int]:
    """``tokens`` cut after the first end-of-sequence token and to ``room`` tokens (as vLLM stops)."""
    for i, token in enumerate(tokens):
        if token in eos_ids:
            tokens = tokens[: i + 1]
            break
    return tokens[:room]


def eos_token_ids(target_path: str | Path, config) -> set[int]:
    """The ids that end generation: generation_config.json's (what vLLM uses), else the config's."""
    import json

    path = Path(target_path) / "generation_config.json"
    value = json.loads(path.read_text()).get("eos_token_id") if path.exists() else None
    if value is None:
        value = getattr(config, "eos_token_id", None)
    if value is None:
        return set()
    return set(value) if isinstance(value, list) else {int(value)}


def prompt_token_ids(
    target_path: str | Path,
    prompts: list[list[dict]],
    chat: ChatSettings | None = None,
    trust_remote_code: bool = False,
) -> list[list[int]]:
    """Each prompt through the target's chat template with the generation prompt and ``chat``'s
    template variables, as vLLM renders it for the online measurement (and for training)."""
    from eagle3_core.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(target_path, trust_remote_code)
    kwargs = chat.chat_template_kwargs if chat is not None else {}
    return [
        list(
            tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=True, **kwargs)[
                "input_ids"
            ]
        )
        for m in prompts
    ]


def run_offline(
    decoder: ChainDecoder, prompt_ids: list[list[int]], k: int, max_tokens: int, reporter: Reporter | None = None
) -> OfflineResult:
    """All prompts at one k."""
    import time

    reporter = reporter or NullReporter()
    result, start = OfflineResult(k=k), time.perf_counter()
    for i, ids in enumerate(prompt_ids):
        result.completions.append(decoder.decode(ids, k, max_tokens, result.counters))
        reporter.progress("evaluate-offline", i + 1, len(prompt_ids), k=k)
    result.wall_s = time.perf_counter() - start
    return result
