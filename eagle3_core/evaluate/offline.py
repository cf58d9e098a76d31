"""Chain speculative decoding with transformers: the drafter judged without a server.

Greedy, one prompt at a time (batch 1), k draft tokens per step, the same bookkeeping as
vLLM (``SpecCounters``: a draft of k tokens per verification, accepted = the leading draft
tokens equal to the target's greedy choice, the bonus token not counted in ``accepted``).

Each round mirrors vLLM's EAGLE-3 proposer: the drafter reads the target's auxiliary states
for every verified position (step 0, shifted ids), then chains k-1 more tokens on its own
pre-norm hidden stream; the target verifies ``seq + drafts`` in one forward pass, whose
auxiliary states are the next round's input. The target is recomputed over the whole
sequence each round (no KV cache): O(length) per round, cheap on the toy target and the
price of exactness; a large target belongs in vLLM, not here.

Auxiliary layer id k is transformers' ``output_hidden_states[k]`` (vLLM's counting).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eagle3_core.evaluate.metrics import SpecCounters
from eagle3_core.progress import NullReporter, Reporter


@dataclass
class OfflineResult:
    """The counters of one k, and each prompt's greedy completion (target ids)."""

    k: int
    counters: SpecCounters = field(default_factory=SpecCounters)
    completions: list[list[int]] = field(default_factory=list)
    wall_s: float = 0.0


class ChainDecoder:
    """A target and a drafter, loaded once, decoding prompts greedily with k-token drafts."""

    def __init__(self, target_path: str | Path, export_dir: str | Path, threads: int | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from eagle3_core.drafter.model import Eagle3Drafter

        if threads:
            torch.set_num_threads(threads)
        self.target = AutoModelForCausalLM.from_pretrained(str(target_path), dtype=torch.float32).eval()
        embed = self.target.get_input_embeddings().weight.detach()
        self.drafter = Eagle3Drafter.from_export(export_dir, embed_tokens=embed)
        self.aux_ids = list(self.drafter.config.aux_layer_ids)
        self.eos_ids = eos_token_ids(target_path, self.target.config)

    def _target(self, ids: list[int]):
        """(greedy next-token ids (T,), aux states (T, 3H)) of one forward pass over ``ids``."""
        import torch

        out = self.target(torch.tensor([ids]), output_hidden_states=True)
        aux = torch.cat([out.hidden_states[i][0] for i in self.aux_ids], dim=-1)   # (T, 3H)
        return out.logits[0].argmax(-1).tolist(), aux

    def _propose(self, seq: list[int], aux, k: int) -> list[int]:
        """k draft tokens after ``seq``; ``aux`` holds the target states of seq[:-1]'s positions."""
        import torch

        from eagle3_core.drafter.model import KVCache

        n, cache = len(seq), KVCache()
        ids = torch.tensor([seq[1:]])                                         # token i+1 at position i
        positions = torch.arange(n - 1)[None]
        out = self.drafter(ids, self.drafter.combine(aux[None, : n - 1]), positions, cache=cache)
        drafts = []
        for step in range(k):
            token = int(self.drafter.to_target_ids(out.logits[0, -1].argmax()))
            drafts.append(token)
            if step + 1 < k:
                out = self.drafter(torch.tensor([[token]]), out.hidden[:, -1:],
                                   torch.tensor([[n - 1 + step]]), cache=cache)
        return drafts

    def decode(self, prompt_ids: list[int], k: int, max_tokens: int, counters: SpecCounters) -> list[int]:
        """One prompt's greedy completion, recording each verification in ``counters``."""
        import torch

        with torch.inference_mode():
            greedy, aux = self._target(prompt_ids)
            seq, completion = list(prompt_ids) + [greedy[-1]], [greedy[-1]]
            while len(completion) < max_tokens and completion[-1] not in self.eos_ids:
                drafts = self._propose(seq, aux, k)
                greedy, aux_all = self._target(seq + drafts)
                verdicts = greedy[len(seq) - 1:]                            # target's choice after seq, d1..dk
                accepted = next((i for i, (d, t) in enumerate(zip(drafts, verdicts)) if d != t), k)
                counters.record_step(k, accepted)
                new = drafts[:accepted] + [verdicts[accepted]]
                aux = aux_all[: len(seq) + accepted]                        # verified positions only
                new = _until_stop(new, self.eos_ids, max_tokens - len(completion))
                seq += new
                completion += new
        return completion


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


def prompt_token_ids(target_path: str | Path, prompts: list[list[dict]]) -> list[list[int]]:
    """Each prompt through the target's chat template with the generation prompt, as vLLM renders it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(target_path))
    return [list(tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
            for m in prompts]


def run_offline(decoder: ChainDecoder, prompt_ids: list[list[int]], k: int, max_tokens: int,
                reporter: Reporter | None = None) -> OfflineResult:
    """All prompts at one k."""
    import time

    reporter = reporter or NullReporter()
    result, start = OfflineResult(k=k), time.perf_counter()
    for i, ids in enumerate(prompt_ids):
        result.completions.append(decoder.decode(ids, k, max_tokens, result.counters))
        reporter.progress("evaluate-offline", i + 1, len(prompt_ids), k=k)
    result.wall_s = time.perf_counter() - start
    return result
