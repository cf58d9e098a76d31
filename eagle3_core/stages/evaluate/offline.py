"""Chain speculative decoding with transformers: the drafter judged without a server.

Greedy, one prompt at a time (batch 1), k draft tokens per step, the same bookkeeping as
vLLM (``SpecCounters``: a draft of k tokens per verification, accepted = the leading draft
tokens equal to the target's greedy choice, the bonus token not counted in ``accepted``).

Each round mirrors vLLM's proposer for the drafter's kind: an EAGLE-3 drafter reads the target's
auxiliary states for every verified position (step 0, shifted ids), then chains k-1 more tokens on
its own pre-norm hidden stream; a block drafter (DFlash, DSpark: ``drafter/kinds.py``) drafts its k
in one pass over those states. The target verifies the drafts in one forward pass, whose auxiliary
states at the accepted positions are the next round's input. The
target and the drafter keep KV caches that are cropped back to the verified positions after
each verification, so a round costs k+1 target positions and k drafter positions (plus the
newly verified ones); still batch 1: a large target belongs in vLLM, not here.

Where it runs (``placement``): on the GPU in bf16 when there is one, else on the CPU in fp32 (CPU bf16
matmuls are slow and inexact); the drafter stays fp32 on the same device and reads the target's states
cast to its dtype. The target is sized from its config.json before it loads (``states.target_size``):
one that cannot fit is a ``ConfigError``, never the out-of-memory killer (the stage leaves the offline
passes out before that, ``offline_passes.plan_offline``).

Prompts are rendered as the server renders them (``offline_prompt_ids``): through the local chat
template where the server uses it, else the ids vLLM itself returned for them (``return_token_ids``):
for a family vLLM encodes in Python (``target.tokenizer_mode``: DeepSeek-V4; harmony) or a tokenizer
without a chat template; with neither the pass is ``LeftOut``, with the reason.

Auxiliary layer id k is transformers' ``output_hidden_states[k]`` (vLLM's counting).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_core.run.progress import NullReporter, Reporter
from eagle3_core.stages.evaluate.metrics import SpecCounters
from eagle3_core.target.config import ChatSettings, TargetConfig


class LeftOut(Exception):
    """A pass that cannot run here, and why: a reason for the report, not an error. ``said``: the
    reason was already logged (the plan line)."""

    def __init__(self, reason: str, said: bool = False) -> None:
        super().__init__(reason)
        self.said = said


def placement() -> tuple[str, str]:
    """(device, dtype) of the offline passes: the GPU in bf16 when there is one, else the CPU in fp32."""
    import torch

    return ("cuda", "bfloat16") if torch.cuda.is_available() else ("cpu", "float32")


OFFLINE_TOO_LARGE = (
    "measure the drafter in vLLM alone: set evaluate.offline: false (`eagle3 evaluate --online-only`); "
    "or evaluate where the target fits (a GPU, more memory)"
)


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
        self.drafter_dtype = next(drafter.parameters()).dtype  # the target's states are cast to it (bf16 on a GPU)
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
        """Target (``placement``: bf16 on a GPU, fp32 on the CPU), sized before it loads, and drafter
        (fp32, same device) from disk; the drafter shares the target's embedding."""
        import torch

        from eagle3_core.drafter.kinds import drafter_class, kind_of_export
        from eagle3_core.states.target_model import load_target_model
        from eagle3_core.states.target_size import check_target_fits

        if threads:
            torch.set_num_threads(threads)
        device, dtype = placement()
        check_target_fits(target_path, device, dtype, what="evaluate's offline loop", fix=OFFLINE_TOO_LARGE)
        target = load_target_model(target_path, trust_remote_code, device, getattr(torch, dtype))
        embed = target.get_input_embeddings().weight.detach()
        model = drafter_class(kind_of_export(export_dir))  # a block kind drafts in one pass
        drafter = model.from_export(export_dir, embed_tokens=embed).to(embed.device)
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
        # (T, 3H) on the drafter's device and in its dtype: no-ops on the CPU, where both are fp32
        aux = torch.cat([out.hidden_states[i][0].to(self.d.device) for i in self.d.aux_ids], dim=-1)
        aux = aux.to(self.d.drafter_dtype)
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
    from eagle3_core.target.tokenizer import load_tokenizer

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


def offline_prompt_ids(
    target: TargetConfig, prompts: list[list[dict]], served: list[list[int] | None] | None
) -> list[list[int] | None]:
    """Each prompt's ids as the server renders it (module docstring): the local template's, else
    ``served`` (vLLM's own prompt ids per prompt, None where its request failed); ``LeftOut`` with the
    reason when the template cannot stand for the server and vLLM gave none."""
    why = local_render_refusal(target)
    if why is None:
        return prompt_token_ids(target.path, prompts, target.chat, target.trust_remote_code)
    if served and any(ids for ids in served):
        return [list(ids) if ids else None for ids in served]
    raise LeftOut(
        f"{why}, so only the server's own prompt ids render the prompts as vLLM does, and "
        + ("vLLM returned none" if served is not None else "vLLM did not run (evaluate.online: false)")
    )


def local_render_refusal(target: TargetConfig) -> str | None:
    """Why the local template cannot render the prompts as the server does, None where it can."""
    from eagle3_core.rebuild.text_rules import server_renders_prompt
    from eagle3_core.target.tokenizer import load_tokenizer

    if server_renders_prompt(target):
        return "vLLM renders this family's prompt itself" + (
            f" (--tokenizer-mode {target.tokenizer_mode})" if target.tokenizer_mode else " (openai-harmony)"
        )
    if not getattr(load_tokenizer(target.path, target.trust_remote_code), "chat_template", None):
        return "the target's tokenizer has no chat template"
    return None


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
