"""The transformers engine: one forward pass of the base model per batch, states caught by hooks.

The auxiliary states are the inputs of decoder layers ``layers`` (forward pre-hooks), which
is exactly ``output_hidden_states[k]`` without keeping all N + 1 states of the batch alive;
the final state is the base model's ``last_hidden_state`` (after the final norm). The
``lm_head`` is never run: at a 128K vocabulary it would cost more memory than the states.

Batches are right-padded; with causal attention the padding never reaches a real token.
The model comes from ``eagle3_core.states.target_model.load_target_model`` (dtype, device map,
``trust_remote_code``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from eagle3_core.states.engines.batching import Batch, bucket_batches

if TYPE_CHECKING:
    import torch


class TransformersEngine:
    """Forward passes of a transformers causal LM, returning (aux [T,3,H], final [T,H]) per sample."""

    name = "transformers"

    def __init__(self, model, layers: list[int], device: str, max_tokens_per_batch: int) -> None:
        self.model, self.layers, self.max_tokens = model, list(layers), max_tokens_per_batch
        self.device = device
        self.input_device = model.get_input_embeddings().weight.device
        self._lock = threading.Lock()  # one forward at a time: the hooks share a buffer

    def plan(self, lengths: list[int]) -> list[Batch]:
        return bucket_batches(lengths, self.max_tokens)

    def forward(self, batch_ids: list[list[int]]) -> list[tuple["torch.Tensor", "torch.Tensor"]]:
        """The states of each sample of one batch, bf16 on CPU, padding removed."""
        import torch

        ids, mask = self._pad(batch_ids)
        caught: dict[int, torch.Tensor] = {}
        with self._lock, torch.inference_mode(), self._hooks(caught):
            final = self.model.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        aux = torch.stack([caught[k].to(final.device) for k in self.layers], dim=2)  # (B, T, 3, H)
        aux, final = aux.to("cpu", torch.bfloat16), final.to("cpu", torch.bfloat16)
        return [(aux[i, : len(s)], final[i, : len(s)]) for i, s in enumerate(batch_ids)]

    def _pad(self, batch_ids: list[list[int]]) -> tuple["torch.Tensor", "torch.Tensor"]:
        import torch

        longest = max(len(s) for s in batch_ids)
        ids = torch.zeros(len(batch_ids), longest, dtype=torch.long)
        mask = torch.zeros(len(batch_ids), longest, dtype=torch.long)
        for i, s in enumerate(batch_ids):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            mask[i, : len(s)] = 1
        return ids.to(self.input_device), mask.to(self.input_device)

    def _hooks(self, caught: dict):
        """Pre-hooks on the chosen decoder layers: their input is vLLM's layer id k."""
        import contextlib

        stack = contextlib.ExitStack()
        decoder = self.model.model.layers
        for k in self.layers:

            def grab(module, args, kwargs, k=k):
                caught[k] = args[0] if args else kwargs["hidden_states"]

            stack.callback(decoder[k].register_forward_pre_hook(grab, with_kwargs=True).remove)
        return stack

    def close(self) -> None:
        self.model = None
